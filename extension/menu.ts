// The /context-fold command: Status, Settings, Folded blocks, Discard
// retained images. The engine renders every line and validates every value;
// this file only asks.
import type { ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import type { Ask, CacheWarning } from "./advisory.ts";
import { reportCommand } from "./report.ts";
import { noSessionEntries } from "./session.ts";

export async function contextFoldCommand(args: string, ctx: ExtensionCommandContext, ask: Ask, warning: CacheWarning): Promise<void> {
	const sub = args.trim().toLowerCase();
	if (sub === "report") return reportCommand(ctx, ask);
	// Headless (Pi routes stdout to stderr in print mode): print, never ask.
	if (!ctx.hasUI) return print(await ask(sub === "config" || sub === "settings" ? "config" : "status", {}));
	if (sub === "status") return status(ctx, ask);
	if (sub === "config" || sub === "settings") return settings(ctx, ask);
	if (sub === "folded") return folded(ctx, ask);
	if (sub === "discard-images") return discard(ctx, warning);
	for (;;) {
		const choice = await ctx.ui.select("context-fold", ["Status", "Settings", "Folded blocks", "Discard retained images", "Close"]);
		if (choice === "Status") await status(ctx, ask);
		else if (choice === "Settings") await settings(ctx, ask);
		else if (choice === "Folded blocks") await folded(ctx, ask);
		else if (choice === "Discard retained images") discard(ctx, warning);
		else return;
		if (choice === "Status") return;
	}
}

/** Prints the engine's lines (the status, or the effective settings with their sources). */
function print(view: { lines: string[] }): void {
	process.stdout.write(view.lines.join("\n") + "\n");
}

async function status(ctx: ExtensionCommandContext, ask: Ask): Promise<void> {
	const st = await ask("status", {});
	ctx.ui.notify(st.lines.join("\n"), st.level);
}

function discard(ctx: ExtensionCommandContext, warning: CacheWarning): void {
	const n = warning.discardImages();
	ctx.ui.notify(n ? `Discarded ${n} retained draft ${n === 1 ? "image" : "images"}.` : "No retained draft images.", "info");
}

async function settings(ctx: ExtensionCommandContext, ask: Ask): Promise<void> {
	for (;;) {
		const view = await ask("config", {});
		const rows: string[] = view.values.map((v: any) => v.row);
		const pick = await ctx.ui.select("context-fold settings — pick one to change", [...rows, "Done"]);
		const i = pick === undefined ? -1 : rows.indexOf(pick);
		if (i < 0) return;
		const v = view.values[i];
		let value: string | undefined;
		if (v.choices?.length) {
			value = await ctx.ui.select(v.prompt, [...v.choices, "reset to default"]);
			if (value === "reset to default") value = "default";
		} else {
			value = await ctx.ui.input(v.prompt, v.value);
		}
		if (value === undefined || value.trim() === "") continue;
		try {
			// The engine's confirmation says, too, when the environment overrides the saved value.
			const res = await ask("set", { key: v.key, value: value.trim() });
			ctx.ui.notify(res.message, res.level);
		} catch (e: any) {
			ctx.ui.notify(String(e?.message ?? e), "error");
		}
	}
}

const SHOW = "Show the original (as recall_folded reads it)";
const UNFOLD = "Unfold: send it whole from the next request on";

/** The blocks folded now: pick one to read back or unfold, as the model's tools do. */
async function folded(ctx: ExtensionCommandContext, ask: Ask): Promise<void> {
	for (;;) {
		const view = await ask("folded", {});
		const rows: string[] = view.blocks.map((b: any) => b.row);
		if (rows.length === 0) {
			ctx.ui.notify("context-fold: nothing is folded now.", "info");
			return;
		}
		const pick = await ctx.ui.select(`context-fold: ${rows.length} folded — code · tool · age · size · error lines kept`, [...rows, "Done"]);
		const i = pick === undefined ? -1 : rows.indexOf(pick);
		if (i < 0) return;
		const b = view.blocks[i];
		const act = await ctx.ui.select(`${b.code} (${b.tool})`, [SHOW, UNFOLD, "Back"]);
		let res: any;
		if (act === SHOW) res = await ask("show", { code: b.code, ...noSessionEntries(ctx) });
		else if (act === UNFOLD) res = await ask("unfold", { codes: [b.code] });
		if (res) ctx.ui.notify(res.text, res.isError ? "warning" : "info");
	}
}
