import assert from "node:assert/strict";
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { PROTOCOL_VERSION, VERSION } from "../locate.js";
import { Session } from "../session.ts";

function session(n: number): any[] {
	const out: any[] = [{ role: "system", content: "prompt", timestamp: 0 }, { role: "user", content: [{ type: "text", text: "go" }], timestamp: 1 }];
	for (let i = 0; i < n; i++) {
		out.push({ role: "assistant", content: [{ type: "toolCall", id: `c${i}`, name: "bash", arguments: { command: `run ${i}` } }], timestamp: 10 + 2 * i, responseId: `r${i}`, stopReason: "toolUse" });
		const lines = Array.from({ length: 150 }, (_, k) => (k === 75 ? `ERROR: step ${i} failed` : `c${i} line ${k}: the quick brown fox`));
		out.push({ role: "toolResult", toolCallId: `c${i}`, toolName: "bash", content: [{ type: "text", text: lines.join("\n") }], isError: false, timestamp: 11 + 2 * i });
	}
	return out;
}

function fakeCtx(entries: any[], dir: string, window = 16000): any {
	return {
		hasUI: false,
		ui: { notify() {} },
		model: { contextWindow: window },
		getContextUsage: () => ({ tokens: null, contextWindow: window, percent: null }),
		sessionManager: {
			getSessionId: () => "sess-1",
			getSessionFile: () => undefined,
			getSessionDir: () => dir,
			getEntries: () => entries,
		},
	};
}

const folded = (msgs: any[]) => msgs.filter((m) => m.role === "toolResult" && /^\{#[0-9a-z]{6} FOLDED\}/.test(m.content[0].text)).length;

test("folds apply, survive an engine crash from the cache, and come back after a restart", async () => {
	const entries: any[] = [];
	const host = { appendEntry: (customType: string, data: unknown) => entries.push({ type: "custom", customType, data }), agentDir: "", compaction: () => undefined };
	const dir = mkdtempSync(join(tmpdir(), "cf-session-"));
	const ctx = fakeCtx(entries, dir);
	const s = new Session(host);
	await s.start(ctx);
	const msgs = session(40);
	const first = structuredClone(msgs);
	await s.onContext(first, ctx);
	const n = folded(first);
	assert.ok(n > 10, `expected folds, got ${n}`);
	assert.equal(entries.length, 1, "one fold event recorded before it applied");
	assert.equal(first.length, msgs.length, "message count unchanged");

	// Steady state: the next request repeats the same bytes for the prefix.
	const more = [...msgs, { role: "assistant", content: [{ type: "text", text: "ok" }], timestamp: 500, responseId: "rx" }];
	const second = structuredClone(more);
	await s.onContext(second, ctx);
	assert.equal(JSON.stringify(second.slice(0, msgs.length)), JSON.stringify(first));

	// Crash: committed layers keep applying from the adapter's cache.
	const warnings: string[] = [];
	const orig = process.stderr.write.bind(process.stderr);
	(process.stderr as any).write = (t: string) => (warnings.push(String(t)), true);
	try {
		process.kill(s.enginePid!, "SIGKILL");
		await new Promise((r) => setTimeout(r, 100));
		const third = structuredClone(more);
		await s.onContext(third, ctx);
		assert.equal(JSON.stringify(third.slice(0, msgs.length)), JSON.stringify(first), "cached layers applied after the crash");
		// And the engine restarts, replaying the recorded entry.
		const fourth = structuredClone(more);
		await s.onContext(fourth, ctx);
		assert.equal(JSON.stringify(fourth.slice(0, msgs.length)), JSON.stringify(first), "same folded bytes after the restart");
		assert.ok(s.enginePid, "engine restarted");
	} finally {
		(process.stderr as any).write = orig;
	}
	assert.equal(warnings.filter((w) => w.includes("engine")).length, 1, `one warning, got ${JSON.stringify(warnings)}`);
	s.close();
});

test("a missing engine binary warns once and leaves messages untouched", async () => {
	const prev = process.env.CONTEXTFOLD_BIN;
	process.env.CONTEXTFOLD_BIN = "/nonexistent/contextfold";
	const warnings: string[] = [];
	const orig = process.stderr.write.bind(process.stderr);
	(process.stderr as any).write = (t: string) => (warnings.push(String(t)), true);
	try {
		const s = new Session({ appendEntry() {}, agentDir: "", compaction: () => undefined });
		const ctx = fakeCtx([], "");
		await s.start(ctx).catch(() => {});
		const msgs = session(40);
		const copy = structuredClone(msgs);
		await s.onContext(copy, ctx);
		await s.onContext(copy, ctx);
		assert.deepEqual(copy, msgs);
	} finally {
		(process.stderr as any).write = orig;
		if (prev === undefined) delete process.env.CONTEXTFOLD_BIN;
		else process.env.CONTEXTFOLD_BIN = prev;
	}
	assert.equal(warnings.filter((w) => w.includes("CONTEXTFOLD_BIN=/nonexistent/contextfold (no such file)")).length, 1, JSON.stringify(warnings));
});

/** An executable that counts its starts in `log` and speaks only a hello. */
function fakeEngine(hello: unknown): { bin: string; starts: () => number } {
	const dir = mkdtempSync(join(tmpdir(), "cf-fake-"));
	const script = join(dir, "engine.mjs");
	const log = join(dir, "starts");
	writeFileSync(
		script,
		`import { appendFileSync } from "node:fs"; appendFileSync(${JSON.stringify(log)}, "x");
const b = Buffer.from(JSON.stringify({ method: "hello", params: ${JSON.stringify(hello)} })); const h = Buffer.alloc(4); h.writeUInt32LE(b.length);
process.stdout.write(Buffer.concat([h, b])); process.stdin.resume(); process.stdin.on("end", () => process.exit(0));`,
	);
	const bin = join(dir, "contextfold");
	writeFileSync(bin, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(script)} "$@"\n`);
	chmodSync(bin, 0o755);
	return { bin, starts: () => (existsSync(log) ? readFileSync(log, "utf8").length : 0) };
}

for (const [name, hello, shown] of [
	["an older engine of the same protocol", { protocol: PROTOCOL_VERSION, version: "0.1.9", build: "0123456789ab", platform: "linux-x64" }, "is contextfold 0.1.9 (build 0123456789ab, protocol 2)"],
	["a protocol-1 engine", { protocol: 1, version: "0.1.0-dev" }, "is contextfold 0.1.0-dev (build unknown, protocol 1)"],
	["a newer engine", { protocol: PROTOCOL_VERSION + 1, version: "9.0.0", build: "fedcba987654" }, "is contextfold 9.0.0 (build fedcba987654, protocol 3)"],
] as const) {
	test(`${name} is refused once, by name, and the session runs unfolded`, async () => {
		const eng = fakeEngine(hello);
		const prev = process.env.CONTEXTFOLD_BIN;
		process.env.CONTEXTFOLD_BIN = eng.bin;
		const warnings: string[] = [];
		const orig = process.stderr.write.bind(process.stderr);
		(process.stderr as any).write = (t: string) => (warnings.push(String(t)), true);
		try {
			const entries: any[] = [];
			const host = { appendEntry: (t: string, d: unknown) => entries.push({ type: "custom", customType: t, data: d }), agentDir: "", compaction: () => undefined };
			const ctx = fakeCtx(entries, "");
			const s = new Session(host);
			await s.start(ctx).catch(() => {});
			const msgs = session(40);
			for (let i = 0; i < 3; i++) {
				const copy = structuredClone(msgs);
				await s.onContext(copy, ctx);
				assert.deepEqual(copy, msgs, "the request goes out as Pi built it");
			}
			await assert.rejects(s.call(ctx, "status", {}), (e: any) => e.code === "unavailable" && e.message.includes(shown));
			assert.ok(s.unavailable?.includes(shown), s.unavailable ?? "");
			// A new session runtime in the same process (/new, /tree) says nothing new.
			const s2 = new Session(host);
			await s2.start(ctx).catch(() => {});
			await s2.onContext(structuredClone(msgs), ctx);
			assert.equal(eng.starts(), 2, "one start per session runtime, no respawn per request");
			assert.equal(entries.length, 0, "nothing recorded");
		} finally {
			(process.stderr as any).write = orig;
			if (prev === undefined) delete process.env.CONTEXTFOLD_BIN;
			else process.env.CONTEXTFOLD_BIN = prev;
		}
		assert.equal(warnings.length, 1, JSON.stringify(warnings));
		const w = warnings[0];
		assert.ok(w.includes(`${eng.bin} (from CONTEXTFOLD_BIN) ${shown}; this adapter is ${VERSION} (protocol ${PROTOCOL_VERSION})`), w);
		assert.ok(w.includes(`Fix: point CONTEXTFOLD_BIN at a contextfold ${VERSION} binary`), w);
		assert.ok(w.trimEnd().endsWith("no folding this session"), w);
	});
}

/** A session file as Pi's SessionManager writes and reads it (format 3), for resume tests. */
class FileSessionManager {
	entries: any[] = [];
	private file: string;
	private dir: string;
	constructor(file: string, dir: string) {
		this.file = file;
		this.dir = dir;
	}
	static open(file: string, dir: string): FileSessionManager {
		const sm = new FileSessionManager(file, dir);
		const lines = readFileSync(file, "utf8").split("\n").filter((l) => l !== "");
		sm.entries = lines.slice(1).map((l) => JSON.parse(l));
		return sm;
	}
	private append(e: any): void {
		const prev = this.entries[this.entries.length - 1];
		const entry = { ...e, id: `e${String(this.entries.length + 1).padStart(7, "0")}`, parentId: prev?.id ?? null, timestamp: "2026-12-02T00:00:00.000Z" };
		if (this.entries.length === 0) writeFileSync(this.file, JSON.stringify({ type: "session", version: 3, id: "sess-1", timestamp: entry.timestamp, cwd: "/w" }) + "\n");
		this.entries.push(entry);
		writeFileSync(this.file, JSON.stringify(entry) + "\n", { flag: "a" });
	}
	appendMessage(message: unknown): void {
		this.append({ type: "message", message });
	}
	appendCustomEntry(customType: string, data: unknown): void {
		this.append({ type: "custom", customType, data });
	}
	getSessionId = () => "sess-1";
	getSessionFile = () => this.file;
	getSessionDir = () => this.dir;
	getEntries = () => this.entries;
	getHeader = () => ({ type: "session", version: 3 });
	buildSessionProjection = () => {
		const entries = this.entries.filter((e) => e.type === "message").map((e) => ({ sourceEntry: e, messages: [e.message] }));
		return { entries, messages: entries.map((e) => e.messages[0]) };
	};
	messages = () => this.entries.filter((e) => e.type === "message").map((e) => e.message);
}

test("a resume reads the fold entries and the messages from the session file, with the same result", async () => {
	const dir = mkdtempSync(join(tmpdir(), "cf-resume-"));
	const file = join(dir, "session.jsonl");
	const a = new FileSessionManager(file, dir);
	const ctxFor = (sm: any) => ({ ...fakeCtx([], dir), sessionManager: sm });
	const hostFor = (sm: any) => ({ appendEntry: (t: string, d: unknown) => sm.appendCustomEntry(t, d), agentDir: "", compaction: () => undefined });
	const msgs = session(40);
	const s = new Session(hostFor(a));
	await s.start(ctxFor(a));
	for (let i = 0; i < msgs.length; i++) {
		a.appendMessage(msgs[i]);
		if (i % 2 === 1) await s.onContext(structuredClone(a.messages()), ctxFor(a));
	}
	s.close();
	assert.ok(a.entries.some((e) => e.type === "custom"), "setup: the session folded");

	const sent: { method: string; bytes: number }[] = [];
	const proto = (await import("../protocol.ts")).Engine.prototype as any;
	const raw = proto.requestRaw;
	proto.requestRaw = function (method: string, params: string, t: number) {
		sent.push({ method, bytes: params.length });
		return raw.call(this, method, params, t);
	};
	const resumed = async (sm: any, typed?: any) => {
		sent.length = 0;
		const r = new Session(hostFor(sm));
		const ctx = ctxFor(sm);
		await r.start(ctx);
		if (typed) sm.appendMessage(typed);
		const req = structuredClone(sm.messages());
		await r.onContext(req, ctx);
		r.close();
		return { req, sent: [...sent] };
	};
	try {
		const byFile = await resumed(FileSessionManager.open(file, dir));
		const noFile = FileSessionManager.open(file, dir);
		noFile.getSessionFile = () => undefined as any;
		const bySend = await resumed(noFile);
		assert.ok(folded(byFile.req) > 10, "folds apply after the resume");
		assert.equal(JSON.stringify(byFile.req), JSON.stringify(bySend.req), "the same request either way");
		const total = JSON.stringify(msgs).length;
		assert.deepEqual(byFile.sent.map((x) => x.method), ["open", "preload", "turn"], "no resend");
		for (const x of byFile.sent) assert.ok(x.bytes < total / 10, `${x.method} sent ${x.bytes} bytes of a ${total}-byte session`);
		assert.deepEqual(bySend.sent.map((x) => x.method), ["open", "turn"], "no preload without a file");
		assert.ok(bySend.sent[1].bytes > total, "without a file everything is sent");

		// The user's next message after the resume: the preload holds the
		// rest, so the first request sends that message alone, and folds the
		// same as a resend of everything.
		const typed = { role: "user", content: [{ type: "text", text: "go on" }], timestamp: 99_999 };
		// Each on its own copy: a resumed session appends to its file.
		const copy = () => {
			const f = join(mkdtempSync(join(tmpdir(), "cf-resume-")), "session.jsonl");
			copyFileSync(file, f);
			return FileSessionManager.open(f, dir);
		};
		const next = await resumed(copy(), typed);
		const whole = copy();
		whole.getSessionFile = () => undefined as any;
		const wholeSent = await resumed(whole, typed);
		assert.equal(next.req.length, msgs.length + 1);
		assert.ok(JSON.stringify(next.req) === JSON.stringify(wholeSent.req), "the same request as a full send");
		assert.deepEqual(next.sent.map((x) => x.method), ["open", "preload", "turn"]);
		assert.ok(next.sent[2].bytes < 2000, `the first request sent ${next.sent[2].bytes} bytes: only the new message`);
	} finally {
		proto.requestRaw = raw;
	}
});
