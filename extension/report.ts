// /context-fold report: the engine binary's `contextfold report` writes the
// current session's page; this file names the session, the window and
// where the page goes, and prints the path.
import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import { locate, notFoundMessage } from "./locate.js";

/** What the report needs of the session: its file, folder and id, and the model's window. */
export interface ReportTarget {
	sessionFile: string;
	sessionDir: string;
	sessionId: string;
	window: number;
}

/** The page's path: beside the handoff seed, in the session folder's context-fold/<id>/. */
export function reportPath(t: ReportTarget): string {
	return join(t.sessionDir, "context-fold", t.sessionId, `report-${t.sessionId}.html`);
}

/** The engine's arguments for t's page (the window only when known: the page then draws its lines). */
export function reportArgs(t: ReportTarget): string[] {
	const args = ["report", "-o", reportPath(t)];
	if (t.window > 0) args.push("-window", String(t.window));
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
export async function reportCommand(ctx: ExtensionCommandContext): Promise<void> {
	const sm = ctx.sessionManager;
	const sessionFile = sm.getSessionFile();
	const say = (text: string, level: "info" | "warning"): void => {
		if (ctx.hasUI) ctx.ui.notify(text, level);
		else process.stdout.write(text + "\n");
	};
	if (!sessionFile) return say("context-fold report: this session has no file (--no-session), so there is nothing to report", "warning");
	const where = locate();
	if (!where.found) return say(`context-fold report: ${notFoundMessage(where)}`, "warning");
	const t = { sessionFile, sessionDir: sm.getSessionDir() ?? "", sessionId: sm.getSessionId(), window: ctx.model?.contextWindow ?? 0 };
	try {
		say(`context-fold report written: ${await writeReport(where.found.bin, t)}`, "info");
	} catch (e: any) {
		say(`context-fold report failed: ${e?.message ?? e}`, "warning");
	}
}
