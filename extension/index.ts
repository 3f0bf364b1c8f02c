// context-fold for Pi: the adapter. It registers hooks and tools, runs the Go
// engine as one child process per session runtime, ships each request's new
// messages to it and applies the substitutions it returns. Every decision —
// what folds, when, into which bytes — is the engine's.
import { type ExtensionAPI, getAgentDir } from "@earendil-works/pi-coding-agent";
import { disabled, PREFIX, Session } from "./session.ts";
import { RECALL, UNFOLD, recallParams, unfoldParams } from "./tools.ts";

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

	pi.registerTool({
		...RECALL,
		promptGuidelines: [...RECALL.promptGuidelines],
		parameters: recallParams,
		async execute(_id, params, _signal, _update, ctx) {
			const sm = ctx.sessionManager;
			const req: Record<string, unknown> = { ...params };
			if (!sm.getSessionFile()) req.entries = (sm.getEntries() as unknown[]).map((e) => JSON.stringify(e)).join("\n");
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
