import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { contextFoldCommand } from "../menu.ts";
import { Session } from "../session.ts";

function session(n: number): any[] {
	const out: any[] = [{ role: "user", content: [{ type: "text", text: "go" }], timestamp: 1 }];
	for (let i = 0; i < n; i++) {
		out.push({ role: "assistant", content: [{ type: "toolCall", id: `c${i}`, name: "bash", arguments: { command: `run ${i}` } }], timestamp: 10 + 2 * i, responseId: `r${i}`, stopReason: "toolUse" });
		const lines = Array.from({ length: 150 }, (_, k) => (k === 75 ? `ERROR: step ${i} failed` : `c${i} line ${k}: the quick brown fox`));
		out.push({ role: "toolResult", toolCallId: `c${i}`, toolName: "bash", content: [{ type: "text", text: lines.join("\n") }], isError: false, timestamp: 11 + 2 * i });
	}
	return out;
}

/** A Pi context with a screen: notifications are kept, selections scripted. */
function uiCtx(entries: any[], dir: string, picks: ((title: string, options: string[]) => string | undefined)[] = []): any {
	const notes: string[] = [];
	return {
		notes,
		hasUI: true,
		ui: {
			notify: (m: string) => notes.push(m),
			setStatus() {},
			select: async (title: string, options: string[]) => picks.shift()?.(title, options),
		},
		model: { contextWindow: 16000 },
		getContextUsage: () => ({ tokens: null, contextWindow: 16000, percent: null }),
		sessionManager: {
			getSessionId: () => "sess-1",
			getSessionFile: () => undefined,
			getSessionDir: () => dir,
			getEntries: () => entries,
		},
	};
}

async function folding(env: Record<string, string> = {}) {
	const saved = { ...process.env };
	Object.assign(process.env, env);
	const entries: any[] = [];
	const host = { appendEntry: (customType: string, data: unknown) => entries.push({ type: "custom", customType, data }), agentDir: "", compaction: () => undefined };
	const ctx = uiCtx(entries, mkdtempSync(join(tmpdir(), "cf-menu-")));
	const s = new Session(host);
	try {
		await s.start(ctx);
		const msgs = session(40);
		await s.onContext(structuredClone(msgs), ctx);
		await s.onContext(structuredClone(msgs), ctx);
	} finally {
		process.env = saved;
	}
	return { s, ctx, entries };
}

test("each fold event is notified once on the screen; foldNotices off silences it", async () => {
	const { s, ctx, entries } = await folding();
	const events = entries.filter((e) => e.data.kind === "fold").length;
	const notes = ctx.notes.filter((n: string) => /^context-fold: folded (1 block|\d+ blocks), −\S+ tok a request \(fold event \d+\)$/.test(n));
	assert.ok(events > 0);
	assert.equal(notes.length, events, ctx.notes.join("\n"));
	s.close();
	const quiet = await folding({ CONTEXTFOLD_FOLD_NOTICES: "off" });
	assert.ok(quiet.entries.length > 0);
	assert.deepEqual(quiet.ctx.notes.filter((n: string) => n.includes("folded")), []);
	quiet.s.close();
});

test("headless /context-fold config prints the effective settings with their sources", async () => {
	const saved = { ...process.env };
	process.env.CONTEXTFOLD_TAIL = "9000";
	const { s, ctx } = await folding();
	process.env = saved;
	const headless = { ...ctx, hasUI: false };
	const out: string[] = [];
	const write = process.stdout.write;
	(process.stdout as any).write = (t: string) => (out.push(t), true);
	try {
		await contextFoldCommand("config", headless, (m, p) => s.call(headless, m, p), null as any);
	} finally {
		(process.stdout as any).write = write;
	}
	const text = out.join("");
	assert.match(text, /^context-fold settings · /);
	assert.match(text, /tail = 9000 +environment CONTEXTFOLD_TAIL · Protected tail/);
	assert.match(text, /foldAt = 0\.45 +default · First fold at/);
	assert.doesNotMatch(text, /fold events/, "the settings, not the status");
	s.close();
});

test("the folded menu shows a block's original and unfolds it", async () => {
	const { s, ctx } = await folding();
	const before = (await s.call(ctx, "folded", {})).blocks;
	assert.ok(before.length > 0);
	const code = before[0].code;
	const row = (_t: string, o: string[]) => o.find((x) => x.startsWith(code + " · "));
	const act = (prefix: string) => (_t: string, o: string[]) => o.find((x) => x.startsWith(prefix));
	const picks = [row, act("Show the original"), row, act("Unfold"), () => "Done"];
	const menu = { ...ctx, notes: [] as string[] };
	menu.ui = { ...ctx.ui, notify: (m: string) => menu.notes.push(m), select: async (t: string, o: string[]) => picks.shift()?.(t, o) };
	await contextFoldCommand("folded", menu, (m, p) => s.call(menu, m, p), null as any);
	assert.equal(menu.notes.length, 2, menu.notes.join("\n"));
	assert.match(menu.notes[0], new RegExp(`✓ ${code} — `));
	assert.match(menu.notes[0], /ERROR: step \d+ failed/);
	assert.match(menu.notes[1], new RegExp(code));
	const after = (await s.call(ctx, "folded", {})).blocks;
	assert.equal(after.length, before.length - 1);
	assert.ok(!after.some((b: any) => b.code === code));
	s.close();
});
