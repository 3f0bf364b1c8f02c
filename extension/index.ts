// context-fold for Pi: the adapter. It registers hooks and tools, runs the Go
// engine as one child process per session runtime, ships each request's new
// messages to it and applies the substitutions it returns. Every decision —
// what folds, when, into which bytes — is the engine's.
import { type ExtensionAPI, getAgentDir } from "@earendil-works/pi-coding-agent";
import { CacheWarning, show } from "./advisory.ts";
import { contextFoldCommand } from "./menu.ts";
import { disabled, noSessionEntries, PREFIX, Session } from "./session.ts";
import { RECALL, UNFOLD, recallParams, unfoldParams } from "./tools.ts";

function text(t: string, details: unknown = {}) {
	return { content: [{ type: "text" as const, text: t }], details };
}

/** The answer to /<name> while CONTEXTFOLD disables the extension: said here, nothing sent to the model. */
export function disabledAnswer(name: string, value: string): string {
	return `context-fold is disabled by CONTEXTFOLD=${value}; /${name} does nothing and nothing was sent to the model. Unset CONTEXTFOLD (or set it to 1) and restart pi to fold.`;
}

/** The CONTEXTFOLD=0 notice was given (once per process, across sessions). */
let disabledSaid = false;

export default function contextFold(pi: ExtensionAPI): void {
	if (disabled()) {
		// Said where the user looks: a notification in the interactive screen
		// (which stderr would be drawn over), stderr headless; once a process.
		pi.on("session_start", (_event, ctx) => {
			if (disabledSaid) return;
			disabledSaid = true;
			const t = `context-fold is disabled by CONTEXTFOLD=${process.env.CONTEXTFOLD}: no folding, and recall_folded and unfold are not offered`;
			if (ctx.hasUI) ctx.ui.notify(t, "info");
			else process.stderr.write(`${PREFIX} ${t}\n`);
		});
		// Unregistered, a typed command would go to the model as a paid
		// prompt. Registered, it is answered here; requests are unchanged
		// (commands are not part of them).
		for (const name of ["context-fold", "fold-handoff"]) {
			pi.registerCommand(name, {
				description: `context-fold is disabled by CONTEXTFOLD=${process.env.CONTEXTFOLD}`,
				handler: async (_args, ctx) => {
					const t = disabledAnswer(name, process.env.CONTEXTFOLD ?? "");
					if (ctx.hasUI) ctx.ui.notify(t, "info");
					else process.stdout.write(t + "\n");
				},
			});
		}
		return;
	}
	const host = {
		appendEntry: (t: string, d: unknown) => pi.appendEntry(t, d),
		agentDir: getAgentDir(),
		compaction: () => {
			try {
				return pi.getSettings().compaction;
			} catch {
				return undefined; // Pi's defaults apply
			}
		},
	};
	let session: Session | null = null;
	const current = () => (session ??= new Session(host));
	const warning = new CacheWarning((method, params) => current().ask(method, params));
	// Without an engine (none found, or refused) the session runs as plain
	// Pi: the cause was said once; commands and tools say it is off, calmly.
	const off = async (ctx: any): Promise<boolean> => {
		await current().start(ctx).catch(() => {});
		return current().unavailable !== null;
	};
	const say = (ctx: any, t: string): void => {
		if (ctx.hasUI) ctx.ui.notify(t, "info");
		else process.stdout.write(t + "\n");
	};
	const offTool = (name: string) =>
		`${name}: context-fold is off this session (${current().unavailable}). Nothing is folded in this request; codes from earlier folds cannot be read back until the engine runs.`;

	const begin = async (ctx: any) => {
		warning.reset();
		session = new Session(host);
		await session.start(ctx).catch(() => {});
		try {
			session.footer(ctx, (await session.call(ctx, "status", {})).footer);
		} catch {}
		await warning.refresh(ctx);
	};
	pi.on("session_start", async (_event, ctx) => {
		session?.close();
		await begin(ctx);
	});
	pi.on("session_tree", async (_event, ctx) => {
		// Fold state is event-sourced from the whole session file; re-open so the
		// engine replays it, and resend the new branch's context in full.
		current().close();
		await begin(ctx);
	});
	pi.on("session_shutdown", () => {
		warning.reset();
		session?.close();
		session = null;
	});
	pi.on("context_with_system", async (event, ctx) => {
		await current().onContext(event.messages as any[], ctx);
		return undefined; // substitutions were applied in place
	});
	// Anthropic caches only at marked breakpoints: mark where the frozen
	// region ends, so a fold event re-writes only what follows it.
	pi.on("before_provider_request", (event) => session?.markPayload(event.payload));
	pi.on("message_end", async (event, ctx) => {
		const m: any = event.message;
		if (m?.role !== "assistant" || !m.usage) return;
		try {
			const u = m.usage;
			const res = await current().call(ctx, "usage", {
				input: u.input ?? 0, output: u.output ?? 0, cacheRead: u.cacheRead ?? 0, cacheWrite: u.cacheWrite ?? 0,
				provider: m.provider, model: m.model, at: m.timestamp, stopReason: m.stopReason,
				// Pi's price of each part (the model's catalog prices): the engine prices what folds saved from it.
				cost: u.cost,
			});
			for (const n of res.notices ?? []) show(ctx, n);
			current().footer(ctx, res.footer);
		} catch {}
	});
	pi.on("agent_start", () => warning.pause());
	pi.on("agent_settled", async (_event, ctx) => {
		try {
			const res = await current().call(ctx, "settled", {});
			for (const n of res.notices ?? []) show(ctx, n);
			current().footer(ctx, res.footer);
		} catch {}
		await warning.refresh(ctx);
	});
	pi.on("model_select", async (event, ctx) => {
		const prev = event.previousModel;
		// A real model change makes the cache genuinely cold (docs/EDGES.md #11).
		if (event.source !== "restore" && prev && (prev.provider !== event.model.provider || prev.id !== event.model.id)) {
			try {
				await current().call(ctx, "modelChanged", {});
			} catch {}
		}
		await warning.refresh(ctx);
	});
	pi.on("input", async (event, ctx) => warning.confirm(event as any, ctx));
	pi.registerCommand("context-fold", {
		description: "context-fold status, settings, folded blocks and the report page. Usage: /context-fold [status|config|folded|report|discard-images]",
		handler: async (args, ctx) => {
			if (await off(ctx)) return say(ctx, `context-fold is off this session (no folding): ${current().unavailable}`);
			try {
				await contextFoldCommand(args, ctx, (m, p) => current().call(ctx, m, p), warning);
			} catch (e: any) {
				show(ctx, { kind: "menu", level: "warning", text: `context-fold: ${e?.message ?? e}` });
			}
		},
	});

	// Deterministic hard compaction (CONTEXTFOLD_COMPACT=det, the default):
	// a verbatim index instead of an LLM summary, no model request. Any
	// failure returns nothing, and Pi's own compaction runs. A threshold
	// compaction that folding can make unnecessary is cancelled instead.
	pi.on("session_before_compact", async (event, ctx) => {
		try {
			if (await off(ctx)) return undefined; // said once already; Pi compacts as without us
			const p = event.preparation;
			const res = await current().call(ctx, "compact", {
				messages: [...p.messagesToSummarize, ...p.turnPrefixMessages],
				firstKeptEntryId: p.firstKeptEntryId,
				previousSummary: p.previousSummary,
				leaf: ctx.sessionManager.getLeafId() ?? "",
				reason: event.reason,
				tokensBefore: p.tokensBefore,
				...noSessionEntries(ctx),
			});
			// The engine's call: folding makes the room, so Pi need not compact.
			if (res.cancel) return { cancel: true };
			if (res.native) return undefined; // CONTEXTFOLD_COMPACT=native: Pi's own
			if (res.skipped?.length)
				current().diag(`${PREFIX} compaction: ${res.skipped.length} ${res.skipped.length === 1 ? "block" : "blocks"} not recallable (record failed): ${res.skipped.join(", ")}`);
			return {
				compaction: {
					summary: res.summary,
					firstKeptEntryId: p.firstKeptEntryId,
					tokensBefore: p.tokensBefore,
					details: { contextFold: { v: 1, seq: res.seq, recorded: res.recorded } },
				},
			};
		} catch (e: any) {
			current().diag(`${PREFIX} deterministic compaction failed (Pi's own compaction runs instead): ${e?.message ?? e}`);
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
			if (await off(ctx)) return say(ctx, `fold-handoff needs the context-fold engine, which is off this session: ${current().unavailable}`);
			let res: any;
			try {
				res = await current().call(ctx, "handoff", { goal: args, leaf: ctx.sessionManager.getLeafId() ?? "", ...noSessionEntries(ctx) });
			} catch (e: any) {
				current().warn(`handoff:${e?.message}`, `fold-handoff failed: ${e?.message ?? e}`);
				return;
			}
			if (res.empty) return say(ctx, res.text); // the engine's answer: nothing to hand off yet
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
				// After newSession the command's ctx is stale (docs/EDGES.md #19): speak through the new one.
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
			if (await off(ctx)) return { ...text(offTool("recall_folded")), isError: true };
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
			if (await off(ctx)) return { ...text(offTool("unfold")), isError: true };
			try {
				const res = await current().call(ctx, "unfold", params);
				return { ...text(res.text, res.details ?? {}), isError: res.isError };
			} catch (e: any) {
				return { ...text(`unfold unavailable: ${e.message}`), isError: true };
			}
		},
	});
}
