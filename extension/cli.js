#!/usr/bin/env node
// The contextfold command an npm install puts on PATH (node_modules/.bin,
// or the global prefix's bin): the engine binary lives in the platform
// package, which has no bin of its own, so this launcher finds it as the
// adapter does (locate.js) and runs it, as esbuild's own launcher does.
// Arguments, stdio, the exit code and signals pass through unchanged.
import { spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { locate, notFoundMessage } from "./locate.js";

// This launcher is itself a "contextfold" on PATH: locate passes over it
// (and over any copy of it) there.
const self = realpathSync(fileURLToPath(import.meta.url));
// The last guard: a launcher started by a launcher stops at once.
if (process.env.CONTEXTFOLD_LAUNCHER) {
	process.stderr.write(`contextfold: ${process.env.CONTEXTFOLD_LAUNCHER} found a launcher, not the engine; set CONTEXTFOLD_BIN to the engine\n`);
	process.exit(1);
}
const where = locate();
if (!where.found) {
	process.stderr.write(`contextfold: ${notFoundMessage(where)}\n`);
	process.exit(1);
}
const child = spawn(where.found.bin, process.argv.slice(2), {
	stdio: "inherit",
	windowsHide: true,
	env: { ...process.env, CONTEXTFOLD_LAUNCHER: self },
});
/** @type {NodeJS.Signals[]} */
const signals = ["SIGINT", "SIGTERM", "SIGHUP"];
// A signal sent to the launcher goes to the engine, which decides what it
// means (the proxy drains its requests); the launcher waits for its exit.
for (const sig of signals) process.on(sig, () => child.kill(sig));
child.on("error", (e) => {
	process.stderr.write(`contextfold: cannot run ${where.found?.bin} (from ${where.found?.source}): ${e.message}\n`);
	process.exit(1);
});
child.on("exit", (code, signal) => {
	if (signal) {
		// Die of the same signal, so the caller sees what the engine saw.
		for (const sig of signals) process.removeAllListeners(sig);
		process.kill(process.pid, signal);
		return;
	}
	process.exit(code ?? 1);
});
