// The /context-fold command: Status, Settings, Discard retained images. The
// engine renders every line and validates every value; this file only asks.
import type { ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import type { Ask, CacheWarning } from "./advisory.ts";
import { reportCommand } from "./report.ts";

export async function contextFoldCommand(args: string, ctx: ExtensionCommandContext, ask: Ask, warning: CacheWarning): Promise<void> {
	const sub = args.trim().toLowerCase();
	if (sub === "report") return reportCommand(ctx, ask);
	if (!ctx.hasUI) {
		// Headless: print the status (Pi routes this to stderr in print mode).
		const st = await ask("status", {});
		process.stdout.write(st.lines.join("\n") + "\n");
		return;
	}
	if (sub === "status") return status(ctx, ask);
	if (sub === "config" || sub === "settings") return settings(ctx, ask);
	if (sub === "discard-images") return discard(ctx, warning);
	for (;;) {
		const choice = await ctx.ui.select("context-fold", ["Status", "Settings", "Discard retained images", "Close"]);
		if (choice === "Status") await status(ctx, ask);
		else if (choice === "Settings") await settings(ctx, ask);
		else if (choice === "Discard retained images") discard(ctx, warning);
		else return;
		if (choice === "Status") return;
	}
}

async function status(ctx: ExtensionCommandContext, ask: Ask): Promise<void> {
	const st = await ask("status", {});
	ctx.ui.notify(st.lines.join("\n"), st.level);
}

function discard(ctx: ExtensionCommandContext, warning: CacheWarning): void {
	const n = warning.discardImages();
	ctx.ui.notify(n ? `Discarded ${n} retained draft image(s).` : "No retained draft images.", "info");
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
