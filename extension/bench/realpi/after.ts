// Loaded after context-fold: appends one JSON line per request to
// $TIMING_LOG with the time context-fold's handlers took (see resume.sh).
import { appendFileSync } from "node:fs";

export default function (pi: any) {
	pi.on("session_start", () => {
		(globalThis as any).__cfStarted = performance.now();
	});
	pi.on("context_with_system", (e: any) => {
		const g = globalThis as any;
		const t = performance.now();
		const folded = e.messages.filter((m: any) => m.role === "toolResult" && /^\{#[0-9a-z]{6} FOLDED\}/.test(m.content?.[0]?.text ?? "")).length;
		const line = { handler_ms: t - g.__cfT0, sessionStart_ms: g.__cfStarted - g.__cfStart, untilRequest_ms: g.__cfT0 - g.__cfStarted, messages: e.messages.length, folded };
		appendFileSync(process.env.TIMING_LOG!, JSON.stringify(line) + "\n");
	});
}
