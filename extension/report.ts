// /context-fold report: the engine binary's `contextfold report` writes the
// current session's page; this file asks the running engine for the lines
// it drew on the last request (window, Pi's reserve, the budget), names the
// session and where the page goes, and prints the path.
import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import type { Ask } from "./advisory.ts";
import { locate, notFoundMessage } from "./locate.js";

/** What the report needs of the session: its file, folder and id, and the lines the engine knows (its reportLimits). */
export interface ReportTarget {
	sessionFile: string;
	sessionDir: string;
	sessionId: string;
	/** The model's window; 0 when unknown (no lines drawn). */
	window: number;
	/** Pi's reserveTokens for the model, -1 when its compaction is off; undefined: Pi's default. */
	reserve?: number;
	/** The budget the engine folds to; undefined: from the settings. */
	budget?: number;
}

/** The page's path: beside the handoff seed, in the session folder's context-fold/<id>/. */
export function reportPath(t: ReportTarget): string {
	return join(t.sessionDir, "context-fold", t.sessionId, `report-${t.sessionId}.html`);
}

/** The engine's arguments for t's page (the window only when known: the page then draws its lines). */
export function reportArgs(t: ReportTarget): string[] {
	const args = ["report", "-o", reportPath(t)];
	if (t.window > 0) args.push("-window", String(t.window));
	if (t.window > 0 && t.reserve !== undefined) args.push("-reserve", String(t.reserve));
	if (t.window > 0 && t.budget) args.push("-budget", String(t.budget));
	return [...args, t.sessionFile];
}

/** Runs `bin report` for t and resolves to the path it printed. */
export function writeReport(bin: string, t: ReportTarget): Promise<string> {
	mkdirSync(join(t.sessionDir, "context-fold", t.sessionId), { recursive: true });
	return new Promise((resolve, reject) => {
		execFile(bin, reportArgs(t), { timeout: 120_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
			if (err) reject(new Error(String(stderr).trim() || err.message));
			else resolve(String(stdout).trim());
		});
	});
}

/** /context-fold report: writes the page for the current session and says where. */
export async function reportCommand(ctx: ExtensionCommandContext, ask: Ask): Promise<void> {
	const sm = ctx.sessionManager;
	const sessionFile = sm.getSessionFile();
	const say = (text: string, level: "info" | "warning"): void => {
		if (ctx.hasUI) ctx.ui.notify(text, level);
		else process.stdout.write(text + "\n");
	};
	if (!sessionFile) return say("context-fold report: this session has no file (--no-session), so there is nothing to report", "warning");
	const where = locate();
	if (!where.found) return say(`context-fold report: ${notFoundMessage(where)}`, "warning");
	const t: ReportTarget = { sessionFile, sessionDir: sm.getSessionDir() ?? "", sessionId: sm.getSessionId(), window: ctx.model?.contextWindow ?? 0 };
	try {
		// The window, Pi's reserve and the budget as the engine used them on the last request.
		const lim = await ask("reportLimits", {});
		if (lim.window > 0) Object.assign(t, { window: lim.window, reserve: lim.reserve, budget: lim.budget });
		say(`context-fold report written: ${await writeReport(where.found.bin, t)}`, "info");
	} catch (e: any) {
		say(`context-fold report failed: ${e?.message ?? e}`, "warning");
	}
}
