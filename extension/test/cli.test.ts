import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { PACKAGE_DIR } from "../locate.js";

// The contextfold launcher (package.json's bin) as npm installs it: the
// package's files in node_modules/pi-context-fold and a link to the
// launcher in node_modules/.bin, which is on PATH; no engine package.
function installed(): { bin: string; pathDir: string } {
	const prefix = mkdtempSync(join(tmpdir(), "cf-cli-"));
	const pkg = join(prefix, "node_modules", "pi-context-fold");
	mkdirSync(join(pkg, "extension"), { recursive: true });
	for (const f of ["package.json", "extension/cli.js", "extension/locate.js"]) copyFileSync(join(PACKAGE_DIR, f), join(pkg, f));
	const pathDir = join(prefix, "node_modules", ".bin");
	mkdirSync(pathDir);
	const bin = join(pathDir, "contextfold");
	symlinkSync("../pi-context-fold/extension/cli.js", bin);
	return { bin, pathDir };
}

const engine = process.env.CONTEXTFOLD_BIN;

function run(bin: string, args: string[], env: NodeJS.ProcessEnv) {
	return spawnSync(process.execPath, [bin, ...args], { env, encoding: "utf8", timeout: 20_000 });
}

test("the launcher runs the engine with the arguments, output and exit code passed through", { skip: !engine && "CONTEXTFOLD_BIN is not set (make build)" }, () => {
	const { bin } = installed();
	const env = { PATH: dirname(process.execPath), CONTEXTFOLD_BIN: engine };
	let r = run(bin, ["version", "-json"], env);
	assert.equal(r.status, 0, r.stderr);
	assert.match(r.stdout, /"version":"\d+\.\d+\.\d+/);
	r = run(bin, ["no-such-command"], env);
	assert.equal(r.status, 2);
	assert.equal(r.stdout, "");
	assert.match(r.stderr, /^contextfold: unknown command "no-such-command"/);
});

test("with no engine the launcher says so and does not run itself from PATH", () => {
	const { bin, pathDir } = installed();
	// The launcher is the only contextfold on PATH: found there, it would
	// start itself over and over.
	const r = run(bin, ["version"], { PATH: [pathDir, dirname(process.execPath)].join(":") });
	assert.equal(r.error, undefined);
	assert.equal(r.status, 1);
	assert.match(r.stderr, /^contextfold: no contextfold engine for \S+; tried CONTEXTFOLD_BIN \(not set\); .*contextfold on PATH \(not found\)\. Fix: /);
});
