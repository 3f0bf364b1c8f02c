import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { exeName, locate, mismatch, notFoundMessage, PACKAGE_DIR, PACKAGE_NAME, PLATFORMS, PROTOCOL_VERSION, VERSION } from "../locate.js";

function exe(dir: string, name = "contextfold"): string {
	mkdirSync(dir, { recursive: true });
	const p = join(dir, name);
	writeFileSync(p, "");
	chmodSync(p, 0o755);
	return p;
}

// A package directory without bin/ (the checkout's own may hold a build).
const PKG = mkdtempSync(join(tmpdir(), "cf-pkg-"));

const none = () => {
	throw new Error("not installed");
};

test("the platform list and version come from package.json", () => {
	assert.deepEqual(PLATFORMS, ["darwin-arm64", "darwin-x64", "linux-arm64", "linux-x64", "win32-x64"]);
	assert.equal(PACKAGE_NAME, "pi-context-fold");
	assert.match(VERSION, /^\d+\.\d+\.\d+/);
	assert.equal(exeName("win32"), "contextfold.exe");
	assert.equal(exeName("linux"), "contextfold");
});

test("CONTEXTFOLD_BIN wins, and a wrong one is reported with its reason and what unsetting it finds, not passed over", () => {
	const dir = mkdtempSync(join(tmpdir(), "cf-loc-"));
	const bin = exe(join(dir, "x"));
	const onPath = exe(join(dir, "p"));
	let l = locate({ packageDir: PKG, env: { CONTEXTFOLD_BIN: bin, PATH: join(dir, "p") }, platform: "linux", arch: "x64", resolve: none });
	assert.deepEqual(l.found, { bin, source: "CONTEXTFOLD_BIN" });
	l = locate({ packageDir: PKG, env: { CONTEXTFOLD_BIN: join(dir, "gone"), PATH: join(dir, "p") }, platform: "linux", arch: "x64", resolve: none });
	assert.equal(l.found, null, `must not fall back to ${onPath}`);
	assert.deepEqual(l.tried, [`CONTEXTFOLD_BIN=${join(dir, "gone")} (no such file)`]);
	assert.equal(
		notFoundMessage(l),
		`no contextfold engine: CONTEXTFOLD_BIN=${join(dir, "gone")} (no such file). Fix: point CONTEXTFOLD_BIN at a contextfold ${VERSION} binary, or unset it to use ${onPath} (PATH)`,
	);
	l = locate({ packageDir: PKG, env: { CONTEXTFOLD_BIN: dir, PATH: "" }, platform: "linux", arch: "x64", resolve: none });
	assert.equal(l.found, null, "a directory is not an engine");
	const m = notFoundMessage(l);
	assert.ok(m.startsWith(`no contextfold engine: CONTEXTFOLD_BIN=${dir} (a directory, not the binary). Fix: `), m);
	assert.ok(m.endsWith(`; unsetting it finds no other engine (tried contextfold-linux-x64 (not installed); ${join(PKG, "bin", "contextfold")} (missing); contextfold on PATH (not found))`), m);

	// A file without the execute bit: named, with the chmod that fixes it.
	const plain = join(dir, "plain");
	writeFileSync(plain, "");
	chmodSync(plain, 0o644);
	l = locate({ packageDir: PKG, env: { CONTEXTFOLD_BIN: plain, PATH: join(dir, "p") }, platform: "linux", arch: "x64", resolve: none });
	assert.equal(l.found, null);
	assert.ok(notFoundMessage(l).startsWith(`no contextfold engine: CONTEXTFOLD_BIN=${plain} (not executable). Fix: make it executable (chmod +x ${plain}), or point`), notFoundMessage(l));
	// Windows has no execute bit.
	assert.deepEqual(locate({ packageDir: PKG, env: { CONTEXTFOLD_BIN: plain, PATH: "" }, platform: "win32", arch: "x64", resolve: none }).found, { bin: plain, source: "CONTEXTFOLD_BIN" });
	// PATH passes over a file it cannot run, as a shell does.
	const q = join(dir, "q");
	mkdirSync(q);
	writeFileSync(join(q, "contextfold"), "");
	chmodSync(join(q, "contextfold"), 0o644);
	assert.deepEqual(locate({ packageDir: PKG, env: { PATH: [q, join(dir, "p")].join(":") }, platform: "linux", arch: "x64", resolve: none }).found, { bin: onPath, source: "PATH" });
});

test("the platform package is resolved from this package, before bin/ and PATH", () => {
	const dir = mkdtempSync(join(tmpdir(), "cf-loc-"));
	const pkg = join(dir, "node_modules", "contextfold-darwin-arm64");
	const bin = exe(join(pkg, "bin"));
	exe(join(dir, "p"));
	let asked = "";
	const resolve = (id: string) => ((asked = id), join(pkg, "package.json"));
	const l = locate({ packageDir: PKG, env: { PATH: join(dir, "p") }, platform: "darwin", arch: "arm64", resolve });
	assert.equal(asked, "contextfold-darwin-arm64/package.json");
	assert.deepEqual(l.found, { bin, source: "platform package" });

	const win = join(dir, "node_modules", "contextfold-win32-x64");
	const winBin = exe(join(win, "bin"), "contextfold.exe");
	const w = locate({ packageDir: PKG, env: { PATH: "" }, platform: "win32", arch: "x64", resolve: () => join(win, "package.json") });
	assert.deepEqual(w.found, { bin: winBin, source: "platform package" });
});

test("PATH is the last resort; none found names every place tried and the fix", () => {
	const dir = mkdtempSync(join(tmpdir(), "cf-loc-"));
	const onPath = exe(join(dir, "p"));
	const empty = join(dir, "node_modules", "contextfold-linux-arm64");
	mkdirSync(empty, { recursive: true });
	let l = locate({ packageDir: PKG, env: { PATH: ["", join(dir, "q"), join(dir, "p")].join(":") }, platform: "linux", arch: "arm64", resolve: () => join(empty, "package.json") });
	assert.deepEqual(l.found, { bin: onPath, source: "PATH" });

	l = locate({ packageDir: PKG, env: { PATH: join(dir, "q") }, platform: "linux", arch: "arm64", resolve: () => join(empty, "package.json") });
	assert.equal(l.found, null);
	assert.deepEqual(l.tried, [
		"CONTEXTFOLD_BIN (not set)",
		`${join(empty, "bin", "contextfold")} (missing from contextfold-linux-arm64)`,
		`${join(PKG, "bin", "contextfold")} (missing)`,
		"contextfold on PATH (not found)",
	]);
	const m = notFoundMessage(l);
	assert.ok(m.startsWith("no contextfold engine for linux-arm64; tried CONTEXTFOLD_BIN (not set); "), m);
	assert.ok(m.includes(`Fix: install contextfold-linux-arm64@${VERSION} with the package`), m);
	// The fix names the route that works before the packages are published
	// (RELEASING.md): both tarballs of a make pack, as the README installs them.
	assert.ok(!m.includes("pi install npm:"), m);
	assert.ok(m.includes(`make pack, then npm install --offline --prefix <dir> --legacy-peer-deps ./dist/${PACKAGE_NAME}-${VERSION}.tgz ./dist/contextfold-linux-arm64-${VERSION}.tgz and pi install <dir>/node_modules/${PACKAGE_NAME}`), m);

	assert.ok(!m.includes("make build"), "an installed package is no checkout");
	l = locate({ packageDir: PKG, env: { PATH: "" }, platform: "linux", arch: "x64", resolve: none });
	assert.equal(l.tried[1], "contextfold-linux-x64 (not installed)");

	// A clone installed with pi install <dir>: it can build its own.
	const clone = mkdtempSync(join(tmpdir(), "cf-clone-"));
	writeFileSync(join(clone, "go.mod"), "module x\n");
	l = locate({ packageDir: clone, env: { PATH: "" }, platform: "linux", arch: "x64", resolve: none });
	assert.ok(notFoundMessage(l).endsWith(`; or, with Go, make build in ${clone}`), notFoundMessage(l));
});

test("a platform without a prebuilt engine says so and points at a Go build", () => {
	const l = locate({ packageDir: PKG, env: { PATH: "" }, platform: "freebsd", arch: "x64", resolve: none });
	assert.equal(l.found, null);
	assert.equal(l.tried[1], `contextfold-freebsd-x64 (no prebuilt engine for freebsd-x64; there are for ${PLATFORMS.join(", ")})`);
	const m = notFoundMessage(l);
	assert.ok(m.includes("no contextfold engine for freebsd-x64") && m.includes("make build") && m.includes("CONTEXTFOLD_BIN"), m);
});

test("only this protocol and this exact version are accepted", () => {
	const f = { bin: "/x/contextfold", source: "package bin/" as const };
	assert.equal(mismatch(f, { protocol: PROTOCOL_VERSION, version: VERSION, build: "b" }), null);
	const old = mismatch(f, { protocol: PROTOCOL_VERSION, version: "0.0.1", build: "abc" });
	assert.equal(
		old,
		`/x/contextfold (from package bin/) is contextfold 0.0.1 (build abc, protocol ${PROTOCOL_VERSION}); this adapter is ${VERSION} (protocol ${PROTOCOL_VERSION}). Fix: rebuild it: make build in ${PACKAGE_DIR}`,
	);
	assert.ok(mismatch(f, { protocol: PROTOCOL_VERSION - 1, version: VERSION })?.includes(`protocol ${PROTOCOL_VERSION - 1}`));
	assert.ok(mismatch({ bin: "/y", source: "platform package" }, null)?.includes(`not a contextfold engine (no hello)`));
	const re = mismatch({ bin: "/y", source: "platform package" }, {});
	assert.ok(re?.includes(`reinstall the package with its engine: in a checkout of ${VERSION}, make pack, then npm install`) && !re.includes("pi install npm:"), re ?? "");
	assert.ok(mismatch({ bin: "/y", source: "PATH" }, {})?.includes(`replace it with contextfold ${VERSION}`));
});

test("PATH passes over the package's own launcher, which npm links as contextfold", () => {
	// node_modules/.bin/contextfold -> ../pi-context-fold/extension/cli.js, as
	// npm links the bin (and npm puts node_modules/.bin on PATH for the
	// install check): it runs the engine, it is not one.
	const dir = mkdtempSync(join(tmpdir(), "cf-launcher-"));
	const pkg = join(dir, "node_modules", PACKAGE_NAME);
	exe(join(pkg, "extension"), "cli.js");
	writeFileSync(join(pkg, "package.json"), JSON.stringify({ name: PACKAGE_NAME }));
	const binDir = join(dir, "node_modules", ".bin");
	mkdirSync(binDir);
	symlinkSync(`../${PACKAGE_NAME}/extension/cli.js`, join(binDir, "contextfold"));
	let l = locate({ packageDir: PKG, env: { PATH: binDir }, platform: "linux", arch: "x64", resolve: none });
	assert.equal(l.found, null);
	assert.equal(l.tried.at(-1), "contextfold on PATH (not found)");
	// An engine later on PATH is found past it.
	const engine = exe(join(dir, "engine"));
	l = locate({ packageDir: PKG, env: { PATH: [binDir, join(dir, "engine")].join(":") }, platform: "linux", arch: "x64", resolve: none });
	assert.deepEqual(l.found, { bin: engine, source: "PATH" });
});
