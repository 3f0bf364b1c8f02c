// Cache advisories in the adapter: the runtime half only — timers, once-only
// delivery, and draft images kept across a cancelled prompt. Whether a cache
// has expired, and what to say, is the engine's answer (internal/core/telemetry).
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";

export interface Notice {
	kind: string;
	level: "info" | "warning";
	text: string;
}

/** Shows a notice: a notification interactively, stderr headless. A failing sink never breaks the turn. */
export function show(ctx: ExtensionContext | null, n: Notice): void {
	try {
		if (ctx?.hasUI) {
			ctx.ui.notify(n.text, n.level);
			return;
		}
	} catch {}
	process.stderr.write(`[context-fold] ${n.text}\n`);
}

/** Advisory failures already shown in this process, by text. */
const advisoryFailures = new Set<string>();

export type Ask = (method: string, params: Record<string, unknown>) => Promise<any>;

/** The idle-expiry warning: asks the engine, sleeps on an unref'd timer, asks again. */
export class CacheWarning {
	private timer: ReturnType<typeof setTimeout> | null = null;
	private epoch = 0;
	private images: { data: string; mimeType: string; type: "image" }[] = [];
	private readonly ask: Ask;

	constructor(ask: Ask) {
		this.ask = ask;
	}

	/** Stops the timer (agent_start: the cache is being used). */
	pause(): void {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
	}

	/** Forgets everything (session switch, tree navigation, shutdown). */
	reset(): void {
		this.pause();
		this.epoch++;
		this.images = [];
	}

	/** Re-arms the forecast: interactive, idle sessions only. */
	async refresh(ctx: ExtensionContext): Promise<void> {
		this.pause();
		if (!ctx.hasUI || (ctx.mode !== undefined && ctx.mode !== "tui") || !ctx.isIdle() || !ctx.model) return;
		const epoch = this.epoch;
		try {
			const res = await this.ask("forecast", { now: Date.now(), provider: ctx.model.provider, model: ctx.model.id, tokens: ctx.getContextUsage()?.tokens ?? 0 });
			if (epoch !== this.epoch) return;
			if (res.notice) show(ctx, res.notice);
			else if (res.remainingMs > 0) {
				this.timer = setTimeout(() => void this.refresh(ctx), Math.min(res.remainingMs + 50, 2_147_483_647));
				this.timer.unref?.();
			}
		} catch (e: any) {
			if (e?.code === "unavailable") return; // no engine this session: said once at the start
			// One warning per cause, however many turns repeat it.
			const text = `Cache advisory unavailable: ${e?.message ?? e}`;
			if (advisoryFailures.has(text)) return;
			advisoryFailures.add(text);
			show(ctx, { kind: "advisory", level: "warning", text });
		}
	}

	/**
	 * The opt-in confirmation before an interactive prompt that would rebill
	 * an expired cache. Automation, RPC and queued input pass untouched; any
	 * failure lets the input proceed.
	 */
	async confirm(event: { text: string; images?: any[]; source: string; streamingBehavior?: string }, ctx: ExtensionContext): Promise<any> {
		const proceed = () => {
			if (this.images.length === 0) return { action: "continue" };
			const images = merge(this.images, event.images);
			this.images = [];
			return { action: "transform", text: event.text, images };
		};
		if (!ctx.hasUI || ctx.mode !== "tui" || event.source !== "interactive" || event.streamingBehavior || !ctx.model) return proceed();
		try {
			const res = await this.ask("forecast", { now: Date.now(), provider: ctx.model.provider, model: ctx.model.id, tokens: ctx.getContextUsage()?.tokens ?? 0, check: true });
			if (!res.confirm || !res.risky) return proceed();
			const epoch = this.epoch;
			const choice = await ctx.ui.select(res.text, ["Keep draft", "Send anyway"]);
			if (epoch !== this.epoch) {
				ctx.ui.notify("Session changed; prompt not sent.", "warning");
				return { action: "handled" };
			}
			if (choice === "Send anyway") return proceed();
			this.images = merge(this.images, event.images);
			try {
				ctx.ui.setEditorText(event.text);
			} catch {
				ctx.ui.notify(`Prompt not sent; editor restore failed. Draft: ${event.text}`, "warning");
			}
			ctx.ui.notify(this.images.length ? `${this.images.length} ${this.images.length === 1 ? "image" : "images"} kept for your next prompt in this session. /context-fold discard-images clears them.` : "Draft kept; prompt not sent.", "info");
			return { action: "handled" };
		} catch {
			return proceed();
		}
	}

	/** Drops images kept from a cancelled prompt. */
	discardImages(): number {
		const n = this.images.length;
		this.images = [];
		return n;
	}
}

function merge(a: any[], b: any[] | undefined): any[] {
	const out = [...a];
	for (const img of b ?? []) if (!out.some((x) => x.data === img.data && x.mimeType === img.mimeType)) out.push(img);
	return out;
}
