// npm's postinstall check (esbuild's install.js plays the same part): an
// install that left no engine this package can run fails here with the one
// message the adapter would give, instead of succeeding silently and then
// sending every request unfolded. `pi install npm:…` and `git:…` run it;
// a local-path install runs no scripts, and the adapter says it at startup.
import { execFileSync } from "node:child_process";
import { locate, mismatch, notFoundMessage, PACKAGE_NAME } from "./locate.js";

/**
 * The engine's version facts, from `contextfold version -json`; an engine
 * older than that flag prints "contextfold <version>" and no JSON.
 * @param {string} bin
 * @returns {import("./locate.js").Hello}
 */
function versionOf(bin) {
	const out = execFileSync(bin, ["version", "-json"], { encoding: "utf8", timeout: 20_000, stdio: ["ignore", "pipe", "pipe"] });
	try {
		return JSON.parse(out);
	} catch {
		const m = /^contextfold (\S+)/.exec(out.trim());
		return m ? { version: m[1] } : {};
	}
}

const where = locate();
let problem = null;
if (!where.found) {
	problem = notFoundMessage(where);
} else {
	try {
		problem = mismatch(where.found, versionOf(where.found.bin));
	} catch (e) {
		problem = `${where.found.bin} (from ${where.found.source}) does not run here: ${e instanceof Error ? e.message : e}`;
	}
}
if (problem) {
	process.stderr.write(`${PACKAGE_NAME}: ${problem}\n`);
	process.exit(1);
}
