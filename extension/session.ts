// One Pi session runtime's connection to its engine: start and replay,
// per-request deltas, cached layers, fail-open. It imports no Pi runtime
// module, so the benchmark and tests drive it outside Pi.
import { appendFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { type Found, locate, mismatch, notFoundMessage } from "./locate.js";
import { Engine, EngineError } from "./protocol.ts";
import { applyPlacements, fileRefs, type Layer, markAnchor, type Placement, Tracker, turnParams } from "./wire.ts";

/** What a Session needs from Pi beyond the per-call context. */
export interface Host {
	appendEntry(customType: string, data: unknown): void;
	agentDir: string;
	/** Pi's merged "compaction" settings, as the user wrote them (the engine resolves them per model). */
	compaction(): unknown;
}

export const CUSTOM_TYPE = "contextfold.fold";
export const PREFIX = "[context-fold]";

export function disabled(): boolean {
	const v = (process.env.CONTEXTFOLD ?? "").trim().toLowerCase();
	return v === "0" || v === "off" || v === "false";
}

function timeoutMs(name: string, dflt: number): number {
	const n = Number(process.env[name]);
	return Number.isFinite(n) && n > 0 ? n : dflt;
}

const TURN_TIMEOUT = () => timeoutMs("CONTEXTFOLD_ENGINE_TIMEOUT_MS", 10_000);
const TOOL_TIMEOUT = 30_000;

/**
 * The preload sent right after open: the context Pi builds from its session
 * file, named by entry ids, so that the engine decodes it (and digests
 * ahead) while the user types. Null when the file holds none of it.
 */
function preloadParams(sm: any): { msgs: unknown[]; json: string } | null {
	try {
		if (!sm.getSessionFile?.()) return null;
		const proj = sm.buildSessionProjection?.();
		const msgs = proj?.messages;
		if (!Array.isArray(msgs) || msgs.length === 0) return null;
		const file = fileRefs(sm, msgs, proj);
		return file ? { msgs, json: turnParams(msgs, 0, {}, file) } : null;
	} catch {
		return null;
	}
}

/** Warnings already shown by any Session in this process, by text: a cause
 * that outlives one session runtime (no engine, a refused engine) is said once. */
const said = new Set<string>();

function firstLine(t: string): string {
	const line = t.trim().split("\n", 1)[0];
	return line.length > 200 ? line.slice(0, 199) + "…" : line;
}

/** The facts of the request's model the engine's thinking rules need. */
function modelFacts(m: ExtensionContext["model"]): Record<string, unknown> | undefined {
	if (!m) return undefined;
	// compat's type depends on the api; only Anthropic's has this flag.
	const compat = m.compat as { supportsMidConvoEffort?: boolean } | undefined;
	return { api: m.api, provider: m.provider, id: m.id, midConvoEffort: compat?.supportsMidConvoEffort === true || undefined };
}

/** A session without a file sends its entries for the engine to read. */
export function noSessionEntries(ctx: { sessionManager: { getSessionFile(): string | undefined; getEntries(): unknown[] } }): { entries?: string } {
	if (ctx.sessionManager.getSessionFile()) return {};
	return { entries: ctx.sessionManager.getEntries().map((e) => JSON.stringify(e)).join("\n") };
}

/** The CONTEXTFOLD_* environment, for the engine to parse and validate. */
function knobEnv(): Record<string, string> {
	const out: Record<string, string> = {};
	for (const [k, v] of Object.entries(process.env)) if (k.startsWith("CONTEXTFOLD_") && v !== undefined) out[k] = v;
	return out;
}

/** One Pi session runtime's connection to its engine. */
export class Session {
	private engine: Engine | null = null;
	private opening: Promise<void> | null = null;
	/** The preload after open, until it settles (see preloadParams). */
	private preloading: Promise<void> | null = null;
	private tracker = new Tracker();
	private layers = new Map<number, Layer>();
	private placements: Placement[] = [];
	/** The tool-call id ending the frozen region, to mark for an Anthropic cache (see markAnchor). */
	private anchor = "";
	private needFull = true;
	/** The compaction settings last sent, as JSON; null until sent to this engine. */
	private sentCompaction: string | null = null;
	private warned = new Set<string>();
	private ctx: ExtensionContext | null = null;
	private shutdown = false;
	private opened = false;
	/** Why this session runs without an engine (none found, or refused); then nothing folds and nothing respawns. */
	private off: string | null = null;
	private readonly host: Host;

	constructor(host: Host) {
		this.host = host;
	}

	/** Warns once per kind: stderr headless, a notification interactively. */
	warn(kind: string, text: string): void {
		if (this.warned.has(kind)) return;
		this.warned.add(kind);
		const ctx = this.ctx;
		try {
			if (ctx?.hasUI) ctx.ui.notify(`context-fold: ${text}`, "warning");
			else process.stderr.write(`${PREFIX} ${text}\n`);
		} catch {
			process.stderr.write(`${PREFIX} ${text}\n`);
		}
	}

	/** The log file diagnostics go to in Pi's interactive screen. */
	logPath(): string {
		const sm = this.ctx?.sessionManager;
		const dir = sm?.getSessionDir();
		const id = sm?.getSessionId();
		return dir && id ? join(dir, "context-fold", id, "engine.log") : join(this.host.agentDir, "context-fold", "engine.log");
	}

	/**
	 * Writes a diagnostic: stderr headless; in the interactive screen, which
	 * stderr would overwrite, the log file, with one notification per level
	 * naming it (debug output is info; anything else a warning).
	 */
	diag(text: string, quiet = false): void {
		const ctx = this.ctx;
		if (ctx?.mode !== "tui") {
			process.stderr.write(text.endsWith("\n") ? text : text + "\n");
			return;
		}
		const path = this.logPath();
		const debug = /^(time=\S+ )?level=(DEBUG|INFO)\b/.test(text);
		try {
			mkdirSync(dirname(path), { recursive: true });
			appendFileSync(path, text.endsWith("\n") ? text : text + "\n");
		} catch (e: any) {
			this.warn("log", `could not write the diagnostics log ${path}: ${e?.message ?? e}`);
			return;
		}
		const kind = debug ? "log:info" : "log:warning";
		if (quiet || this.warned.has(kind)) return;
		this.warned.add(kind);
		try {
			if (debug) ctx.ui.notify(`context-fold: engine diagnostics are written to ${path}`, "info");
			else ctx.ui.notify(`context-fold: ${firstLine(text)} (details in ${path})`, "warning");
		} catch {}
	}

	/** Why this session has no engine, or null while it has one. */
	get unavailable(): string | null {
		return this.off;
	}

	/** Turns folding off for this session, saying why once per process. */
	private turnOff(reason: string): EngineError {
		this.off = reason;
		if (!said.has(reason)) {
			said.add(reason);
			this.warn(`off:${reason}`, `${reason} — no folding this session`);
		}
		return new EngineError(reason, "unavailable");
	}

	/** Starts the engine and replays the session's fold entries into it. */
	start(ctx: ExtensionContext): Promise<void> {
		this.ctx = ctx;
		if (this.off) return Promise.reject(new EngineError(this.off, "unavailable"));
		if (this.engine?.alive && this.opening) return this.opening;
		const where = locate();
		if (!where.found) return Promise.reject(this.turnOff(notFoundMessage(where)));
		const found: Found = where.found;
		let early = "";
		const engine = new Engine({
			bin: found.bin,
			accept: (hello) => {
				const why = mismatch(found, hello);
				if (why) this.turnOff(why);
				return why;
			},
			onRequest: (method, params) => this.serve(method, params),
			onExit: (reason) => {
				// Before its open completes, a failure is the start's to report.
				if (!this.shutdown && this.opened && this.engine === engine) this.warn("crash", `${reason}; folds already committed keep applying and the engine restarts on the next request`);
			},
			// Until the engine is open, what it prints belongs to the start's
			// one message (a wrong binary's complaint), not a second notice.
			onStderr: (t) => {
				if (this.opened) this.diag(t);
				else if (early.length < 4096) early += t;
			},
		});
		this.engine = engine;
		this.opened = false;
		this.preloading = null;
		this.needFull = true;
		this.tracker.reset();
		const sm = ctx.sessionManager;
		const folds: any[] = [];
		for (const e of sm.getEntries() as any[]) if (e.type === "custom" && e.customType === CUSTOM_TYPE) folds.push(e);
		const params: Record<string, unknown> = {
			sessionId: sm.getSessionId(),
			sessionFile: sm.getSessionFile() ?? "",
			sessionDir: sm.getSessionDir() ?? "",
			entries: folds.map((e) => e.data),
			env: knobEnv(),
			agentDir: this.host.agentDir,
		};
		// The engine reads the entries from the session file when it holds
		// them (it says so); otherwise it is asked again with their data.
		const version = sm.getHeader?.()?.version;
		const byId = params.sessionFile !== "" && folds.length > 0 && typeof version === "number" && folds.every((e) => typeof e.id === "string");
		this.opening = (async () => {
			await engine.ready;
			const first = engine.request("open", byId ? { ...params, entries: undefined, entryIds: folds.map((e) => e.id), fileVersion: version } : params, TURN_TIMEOUT());
			// The engine serves requests in order: the preload, built while it
			// opens, goes right behind the open.
			const pre = preloadParams(sm);
			const send = () => {
				const p = pre ? engine.requestRaw("preload", pre.json, TURN_TIMEOUT()) : null;
				p?.catch(() => {}); // settled in settlePreload, or moot if the open fails
				return p;
			};
			let sent = send();
			let res = await first;
			if (byId && res?.entriesFromFile !== true) {
				res = await engine.request("open", params, TURN_TIMEOUT());
				sent = send(); // the second open replaced what the first preload gave
			}
			this.layers.clear();
			for (const l of res.layers ?? []) this.layers.set(l.seq, l);
			for (const w of res.warnings ?? []) this.warn(`open:${w}`, w);
			if (this.engine === engine) {
				this.opened = true;
				if (pre && sent) this.preloading = this.settlePreload(engine, pre.msgs, sent);
			}
			if (early) this.diag(early);
		})();
		this.opening.catch((e) => {
			if (early) this.diag(early, true);
			const printed = early.trim() ? `; it printed: ${firstLine(early)}` : "";
			if ((e?.code === "spawn" || e?.code === "exit") && !this.off) this.turnOff(`${e.message} (from ${found.source})${printed}`);
			else if (!this.off) this.warn("open", `engine start failed: ${e.message}${printed}`);
		});
		return this.opening;
	}

	/**
	 * Takes the preload's answer (see preloadParams): the engine now holds
	 * msgs, so the first request sends only what differs from them, found by
	 * the Tracker as on every request. Any failure leaves the full send of
	 * the first request in place.
	 */
	private async settlePreload(engine: Engine, msgs: unknown[], sent: Promise<any>): Promise<void> {
		try {
			const res = await sent;
			if (this.engine !== engine || !this.needFull || res?.len !== msgs.length) return;
			this.tracker.commit(msgs, 0);
			this.needFull = false;
		} catch {
			// The first request sends everything, as without a preload.
		} finally {
			if (this.engine === engine) this.preloading = null;
		}
	}

	/** Requests the engine makes of the adapter. */
	private serve(method: string, params: any): unknown {
		if (method === "persist") {
			try {
				this.host.appendEntry(params.customType, params.data);
				const d = params.data;
				if (d?.kind === "fold" && Array.isArray(d.folds)) {
					// The engine freezes exactly these digests, in this order, as
					// layer d.seq once we answer; it does not send them again.
					const entries = d.folds.filter((f: any) => typeof f.digest === "string" && f.digest !== "").map((f: any) => ({ id: f.id, code: f.code, text: f.digest }));
					this.layers.set(d.seq, { seq: d.seq, trigger: d.trigger, entries });
				}
				return true;
			} catch (e: any) {
				this.diag(`${PREFIX} could not persist a fold entry: ${e?.message ?? e}`);
				return false;
			}
		}
		throw new Error(`unknown method ${method}`);
	}

	private async live(ctx: ExtensionContext): Promise<Engine> {
		if (this.opened && this.engine?.alive) return this.engine; // the common case: no extra ticks
		if (this.off) throw new EngineError(this.off, "unavailable");
		if (!this.engine?.alive) await this.start(ctx);
		else await this.opening;
		if (!this.engine?.alive) throw new EngineError("engine not running", "closed");
		return this.engine;
	}

	/** The context_with_system pass: delta out, substitutions in. */
	async onContext(messages: any[], ctx: ExtensionContext): Promise<void> {
		this.ctx = ctx;
		let keep = this.needFull ? 0 : this.tracker.prefix(messages);
		try {
			const engine = await this.live(ctx);
			// Pi's own calls first: they overlap a preload still in the engine.
			const usage = ctx.getContextUsage();
			const compaction = this.host.compaction() ?? null;
			const compactionJSON = JSON.stringify(compaction);
			if (this.preloading) {
				await this.preloading;
				this.preloading = null;
				keep = this.needFull ? 0 : this.tracker.prefix(messages);
			}
			if (this.needFull) this.sentCompaction = null;
			const extra = {
				window: usage?.contextWindow ?? ctx.model?.contextWindow ?? 0,
				reported: usage?.tokens ?? null,
				model: modelFacts(ctx.model),
				full: this.needFull || undefined,
				// Sent when changed: the engine keeps folding ahead of Pi's threshold.
				compaction: compactionJSON !== this.sentCompaction ? compaction : undefined,
			};
			// A full send names the messages Pi's session file holds instead of
			// sending them; if the engine cannot read them there, they are sent.
			const file = this.needFull || keep === 0 ? fileRefs(ctx.sessionManager, messages) : null;
			let res = file ? await engine.requestRaw("turn", turnParams(messages, 0, extra, file), TURN_TIMEOUT()).catch((e) => (e?.code === "stale_file" ? null : Promise.reject(e))) : null;
			if (res?.len !== messages.length) res = await engine.requestRaw("turn", turnParams(messages, this.needFull ? 0 : keep, extra), TURN_TIMEOUT());
			this.sentCompaction = compactionJSON;
			this.tracker.commit(messages, this.needFull ? 0 : keep);
			this.needFull = false;
			for (const l of res.layers ?? []) this.layers.set(l.seq, l);
			if (res.placements) this.placements = res.placements;
			this.anchor = res.anchor ?? "";
			if (res.rejected) this.diag(`${PREFIX} ${res.rejected} — this request goes out with earlier folds only`);
			if (res.collisions?.length) this.diag(`${PREFIX} fold-code collision: ${res.collisions.length} ${res.collisions.length === 1 ? "block stays" : "blocks stay"} raw for this session (${res.collisions.join(", ")})`);
			applyPlacements(messages, this.placements, this.layers);
			this.footer(ctx, res.footer);
			// The engine's one short notice of this request's fold event (off: foldNotices).
			if (res.notice && ctx.hasUI) {
				try {
					ctx.ui.notify(res.notice, "info");
				} catch {}
			}
		} catch (e: any) {
			if (this.off) return; // no engine this session: the request goes out as Pi built it
			// Fail open: committed folds keep applying to the unchanged prefix;
			// the engine restarts and resynchronises on the next request.
			if (e?.code === "timeout") {
				this.warn("hang", `${e.message}; restarting it`);
				this.engine?.kill();
			}
			this.needFull = true;
			applyPlacements(messages, this.placements, this.layers, keep);
		}
	}

	/**
	 * Marks the end of the frozen region in the payload Pi is about to send
	 * (markAnchor); returns the payload when it changed. On a failed turn the
	 * previous anchor stands: the previous folds still apply to the prefix.
	 */
	markPayload(payload: unknown): unknown {
		return this.anchor && markAnchor(payload, this.anchor) ? payload : undefined;
	}

	async call(ctx: ExtensionContext, method: string, params: Record<string, unknown>): Promise<any> {
		this.ctx = ctx;
		const engine = await this.live(ctx);
		return engine.request(method, params, TOOL_TIMEOUT);
	}

	/** The engine's process id, for diagnostics and tests. */
	get enginePid(): number | undefined {
		return this.engine?.alive ? this.engine.pid : undefined;
	}

	resync(): void {
		this.needFull = true;
	}

	close(): void {
		this.shutdown = true;
		this.engine?.close();
		this.engine = null;
		this.opening = null;
		this.preloading = null;
	}

	/** Asks the engine with the context of the latest hook. */
	async ask(method: string, params: Record<string, unknown>): Promise<any> {
		if (!this.ctx) throw new EngineError("no session context yet", "closed");
		return this.call(this.ctx, method, params);
	}

	/** Shows the engine's one-line status in Pi's footer (interactive only). */
	footer(ctx: ExtensionContext, text: string | undefined): void {
		if (!text || !ctx.hasUI) return;
		try {
			ctx.ui.setStatus("context-fold", text);
		} catch {}
	}
}

