// context-fold for Pi: the adapter. It registers hooks and tools, runs the Go
// engine as one child process per session runtime, ships each request's new
// messages to it and applies the substitutions it returns. Every decision —
// what folds, when, into which bytes — is the engine's.
import { type ExtensionAPI, getAgentDir } from "@earendil-works/pi-coding-agent";
import { disabled, PREFIX, Session } from "./session.ts";
import { RECALL, UNFOLD, recallParams, unfoldParams } from "./tools.ts";

/** CONTEXTFOLD_COMPACT: det (default) or native (Pi's own LLM compaction). */
function compactMode(): "det" | "native" {
	return (process.env.CONTEXTFOLD_COMPACT ?? "").trim().toLowerCase() === "native" ? "native" : "det";
}

/** A session without a file sends its entries for the engine to read. */
function noSessionEntries(ctx: { sessionManager: { getSessionFile(): string | undefined; getEntries(): unknown[] } }): { entries?: string } {
	if (ctx.sessionManager.getSessionFile()) return {};
	return { entries: ctx.sessionManager.getEntries().map((e) => JSON.stringify(e)).join("\n") };
}

function text(t: string, details: unknown = {}) {
	return { content: [{ type: "text" as const, text: t }], details };
}

export default function contextFold(pi: ExtensionAPI): void {
	if (disabled()) {
		process.stderr.write(`${PREFIX} disabled by CONTEXTFOLD=${process.env.CONTEXTFOLD} — no folding this session\n`);
		return;
	}
	const host = { appendEntry: (t: string, d: unknown) => pi.appendEntry(t, d), agentDir: getAgentDir() };
	let session: Session | null = null;
	const current = () => (session ??= new Session(host));

	pi.on("session_start", async (_event, ctx) => {
		session?.close();
		session = new Session(host);
		await session.start(ctx).catch(() => {});
	});
	pi.on("session_tree", async (_event, ctx) => {
		// Fold state is event-sourced from the whole session file; re-open so the
		// engine replays it, and resend the new branch's context in full.
		const s = current();
		s.close();
		session = new Session(host);
		await session.start(ctx).catch(() => {});
	});
	pi.on("session_shutdown", () => {
		session?.close();
		session = null;
	});
	pi.on("context_with_system", async (event, ctx) => {
		await current().onContext(event.messages as any[], ctx);
		return undefined; // substitutions were applied in place
	});
	pi.on("message_end", (event) => {
		const m: any = event.message;
		if (m?.role === "assistant" && m.usage) current().usage(m.usage);
	});

	// Deterministic hard compaction (CONTEXTFOLD_COMPACT=det, the default):
	// a verbatim index instead of an LLM summary, no model request. Any
	// failure returns nothing, and Pi's own compaction runs.
	pi.on("session_before_compact", async (event, ctx) => {
		if (compactMode() === "native") return undefined;
		try {
			const p = event.preparation;
			const res = await current().call(ctx, "compact", {
				messages: [...p.messagesToSummarize, ...p.turnPrefixMessages],
				firstKeptEntryId: p.firstKeptEntryId,
				previousSummary: p.previousSummary,
				leaf: ctx.sessionManager.getLeafId() ?? "",
				...noSessionEntries(ctx),
			});
			if (res.skipped?.length)
				process.stderr.write(`${PREFIX} compaction: ${res.skipped.length} block(s) not recallable (record failed): ${res.skipped.join(", ")}\n`);
			return {
				compaction: {
					summary: res.summary,
					firstKeptEntryId: p.firstKeptEntryId,
					tokensBefore: p.tokensBefore,
					details: { contextFold: { v: 1, seq: res.seq, recorded: res.recorded } },
				},
			};
		} catch (e: any) {
			process.stderr.write(`${PREFIX} deterministic compaction failed (Pi's own compaction runs instead): ${e?.message ?? e}\n`);
			return undefined;
		}
	});
	pi.on("session_compact", async (_event, ctx) => {
		try {
			const res = await current().call(ctx, "compacted", { ok: true });
			if (res.warning) current().warn("second-compaction", res.warning);
		} catch {}
	});
	(pi.on as any)("session_compact_failed", async (_event: unknown, ctx: any) => {
		try {
			await current().call(ctx, "compacted", { ok: false });
		} catch {}
	});

	pi.registerCommand("fold-handoff", {
		description: "Write a handoff seed: your goal verbatim plus this session's verbatim index; then optionally start a fresh session with it. Usage: /fold-handoff <goal>",
		handler: async (args, ctx) => {
			let res: any;
			try {
				res = await current().call(ctx, "handoff", { goal: args, leaf: ctx.sessionManager.getLeafId() ?? "", ...noSessionEntries(ctx) });
			} catch (e: any) {
				current().warn(`handoff:${e?.message}`, `fold-handoff failed: ${e?.message ?? e}`);
				return;
			}
			if (!ctx.hasUI) {
				process.stdout.write(`${res.path}\n`);
				return;
			}
			const start = await ctx.ui.confirm(
				"fold-handoff",
				`Seed written to ${res.path}.\nStart a fresh session with it as the first message? The session waits until you type.`,
			);
			if (!start) {
				ctx.ui.notify(`handoff seed written: ${res.path}`, "info");
				return;
			}
			const parent = ctx.sessionManager.getSessionFile();
			const out = await ctx.newSession({
				parentSession: parent,
				setup: async (sm) => {
					sm.appendMessage({ role: "user", content: [{ type: "text", text: res.seed }], timestamp: Date.now() });
				},
				// After newSession the command's ctx is stale (EDGES 19): speak through the new one.
				withSession: async (fresh) => fresh.ui.notify(`Fresh session started from the handoff seed (${res.path}). Type your first instruction.`, "info"),
			});
			if (out.cancelled) ctx.ui.notify(`handoff seed written: ${res.path} (the new session was cancelled)`, "warning");
		},
	});

	pi.registerTool({
		...RECALL,
		promptGuidelines: [...RECALL.promptGuidelines],
		parameters: recallParams,
		async execute(_id, params, _signal, _update, ctx) {
			const req: Record<string, unknown> = { ...params, ...noSessionEntries(ctx) };
			try {
				const res = await current().call(ctx, "recall", req);
				return { ...text(res.text, res.details ?? {}), isError: res.isError };
			} catch (e: any) {
				return { ...text(`recall_folded unavailable: ${e.message}`), isError: true };
			}
		},
	});
	pi.registerTool({
		...UNFOLD,
		promptGuidelines: [...UNFOLD.promptGuidelines],
		parameters: unfoldParams,
		async execute(_id, params, _signal, _update, ctx) {
			try {
				const res = await current().call(ctx, "unfold", params);
				return { ...text(res.text, res.details ?? {}), isError: res.isError };
			} catch (e: any) {
				return { ...text(`unfold unavailable: ${e.message}`), isError: true };
			}
		},
	});
}
