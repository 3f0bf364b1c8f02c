// Where the engine binary is, and whether it is the one this package needs.
// Plain JavaScript, because npm runs the install check (install.js) with
// whatever Node it finds; the adapter imports the same code. The package's
// package.json is the one source of the version and of the platform list.
import { accessSync, constants, readFileSync, realpathSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The protocol version this adapter speaks (internal/pi/protocol.Version). */
export const PROTOCOL_VERSION = 2;

/** The package's root directory. */
export const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");

const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, "package.json"), "utf8"));

/** The npm package name, e.g. "pi-context-fold". */
export const PACKAGE_NAME = String(manifest.name);

/** The one version of adapter, engine and packages. */
export const VERSION = String(manifest.version);

/** Prefix of the per-platform engine packages: contextfold-<platform>. */
export const ENGINE_PACKAGE_PREFIX = "contextfold-";

/** Platforms with a prebuilt engine package, e.g. "linux-x64". */
export const PLATFORMS = Object.keys(manifest.optionalDependencies ?? {})
	.filter((n) => n.startsWith(ENGINE_PACKAGE_PREFIX))
	.map((n) => n.slice(ENGINE_PACKAGE_PREFIX.length))
	.sort();

/**
 * @typedef {"CONTEXTFOLD_BIN" | "platform package" | "package bin/" | "PATH"} Source
 * @typedef {{ bin: string, source: Source }} Found
 * @typedef {{ found: Found | null, platform: string, tried: string[], checkout: string | null, badOverride?: string, override?: string, instead?: Located }} Located
 * @typedef {{ protocol?: unknown, version?: unknown, build?: unknown, platform?: unknown }} Hello
 */

/**
 * The binary's file name on a platform.
 * @param {string} [platform]
 */
export function exeName(platform = process.platform) {
	return platform === "win32" ? "contextfold.exe" : "contextfold";
}

/**
 * Why p cannot be run as the engine, or null when it can.
 * @param {string} p
 * @param {string} os
 */
function unusable(p, os) {
	let st;
	try {
		st = statSync(p);
	} catch (e) {
		return /** @type {any} */ (e)?.code === "EACCES" ? "not readable" : "no such file";
	}
	if (st.isDirectory()) return "a directory, not the binary";
	if (!st.isFile()) return "not a regular file";
	if (os === "win32") return null;
	try {
		accessSync(p, constants.X_OK);
		return null;
	} catch {
		return "not executable";
	}
}

/** @param {string} p */
function isFile(p) {
	try {
		return statSync(p).isFile();
	} catch {
		return false;
	}
}

/**
 * Whether p is (a link to) the launcher of a copy of this package: its
 * extension/cli.js, beside a package.json of this package's name.
 * @param {string} p
 */
function isLauncher(p) {
	try {
		const real = realpathSync(p);
		if (basename(real) !== "cli.js" || basename(dirname(real)) !== "extension") return false;
		return JSON.parse(readFileSync(join(dirname(real), "..", "package.json"), "utf8")).name === PACKAGE_NAME;
	} catch {
		return false;
	}
}

/**
 * Finds the engine: CONTEXTFOLD_BIN (an explicit choice: never passed over),
 * then the platform package resolved from this package's location, then the
 * package's own bin/ (a build from a checkout), then PATH (where the
 * package's own launcher is not the engine). `tried` names
 * every place looked at, for the one message when none fits.
 * @param {{ env?: NodeJS.ProcessEnv, platform?: string, arch?: string, packageDir?: string, resolve?: (id: string) => string }} [o]
 * @returns {Located}
 */
export function locate(o = {}) {
	const env = o.env ?? process.env;
	const home = o.packageDir ?? PACKAGE_DIR;
	const os = o.platform ?? process.platform;
	const plat = `${os}-${o.arch ?? process.arch}`;
	const exe = exeName(os);
	/** @type {string[]} */
	const tried = [];
	/** @param {string} bin @param {Source} source @returns {Located} */
	const hit = (bin, source) => ({ found: { bin, source }, platform: plat, tried, checkout: null });
	// A source checkout (pi install of a clone) can also build its own engine.
	const checkout = isFile(join(home, "go.mod")) ? home : null;

	const override = env.CONTEXTFOLD_BIN;
	if (override) {
		const why = unusable(override, os);
		if (!why) return hit(override, "CONTEXTFOLD_BIN");
		tried.push(`CONTEXTFOLD_BIN=${override} (${why})`);
		// An explicit choice is never passed over, but the fix says what
		// unsetting it would find.
		const instead = locate({ ...o, env: { ...env, CONTEXTFOLD_BIN: "" } });
		return { found: null, platform: plat, tried, checkout: null, badOverride: why, override, instead };
	}
	tried.push("CONTEXTFOLD_BIN (not set)");

	const pkg = ENGINE_PACKAGE_PREFIX + plat;
	if (!PLATFORMS.includes(plat)) {
		tried.push(`${pkg} (no prebuilt engine for ${plat}; there are for ${PLATFORMS.join(", ")})`);
	} else {
		const resolve = o.resolve ?? createRequire(join(home, "package.json")).resolve;
		let dir = "";
		try {
			dir = dirname(resolve(`${pkg}/package.json`));
		} catch {}
		const bin = dir && join(dir, "bin", exe);
		const why = bin ? unusable(bin, os) : null;
		if (bin && !why) return hit(bin, "platform package");
		tried.push(!dir ? `${pkg} (not installed)` : why === "no such file" ? `${bin} (missing from ${pkg})` : `${bin} (${why})`);
	}

	const own = join(home, "bin", exe);
	const whyOwn = unusable(own, os);
	if (!whyOwn) return hit(own, "package bin/");
	tried.push(`${own} (${whyOwn === "no such file" ? "missing" : whyOwn})`);

	// As a shell does, PATH passes over files it cannot run; and over this
	// package's own launcher (its bin, extension/cli.js), which npm puts on
	// PATH as contextfold, and which runs the engine rather than being it.
	const path = env.PATH ?? env.Path ?? "";
	for (const dir of path.split(delimiter)) {
		const p = dir && join(dir, exe);
		if (p && !unusable(p, os) && !isLauncher(p)) return hit(p, "PATH");
	}
	tried.push(`${exe} on PATH (not found)`);
	return { found: null, platform: plat, tried, checkout };
}

/**
 * The one message for no engine: the platform, every place tried, the fix.
 * @param {Located} l
 */
export function notFoundMessage(l) {
	if (l.badOverride) {
		const chmod = l.badOverride === "not executable" ? `make it executable (chmod +x ${l.override}), or ` : "";
		const alt = l.instead?.found
			? `, or unset it to use ${l.instead.found.bin} (${l.instead.found.source})`
			: `; unsetting it finds no other engine (tried ${l.instead?.tried.slice(1).join("; ") ?? "nothing else"})`;
		return `no contextfold engine: ${l.tried[0]}. Fix: ${chmod}point CONTEXTFOLD_BIN at a contextfold ${VERSION} binary${alt}`;
	}
	const fix = PLATFORMS.includes(l.platform)
		? `install ${ENGINE_PACKAGE_PREFIX}${l.platform}@${VERSION} with the package (npm does unless optional dependencies are omitted): ${reinstall(l.platform)}; or set CONTEXTFOLD_BIN to a contextfold ${VERSION} binary`
		: `build the engine with Go from the ${VERSION} source (make build) and set CONTEXTFOLD_BIN to it`;
	const here = l.checkout && PLATFORMS.includes(l.platform) ? `; or, with Go, make build in ${l.checkout}` : "";
	return `no contextfold engine for ${l.platform}; tried ${l.tried.join("; ")}. Fix: ${fix}${here}`;
}

/**
 * The reinstall that works before the packages are published (RELEASING.md):
 * both tarballs of one `make pack` (or `make dist`) into one npm prefix, as
 * the README's Install says.
 * @param {string} platform
 */
function reinstall(platform) {
	return `in a checkout of ${VERSION}, make pack, then npm install --offline --prefix <dir> --legacy-peer-deps ./dist/${PACKAGE_NAME}-${VERSION}.tgz ./dist/${ENGINE_PACKAGE_PREFIX}${platform}-${VERSION}.tgz and pi install <dir>/node_modules/${PACKAGE_NAME} (README, Install)`;
}

/**
 * Why an engine's hello is refused, or null when it is the one this package
 * needs: the same protocol and the same release version.
 * @param {Found} found
 * @param {Hello | null | undefined} hello
 */
export function mismatch(found, hello) {
	if (hello && hello.protocol === PROTOCOL_VERSION && hello.version === VERSION) return null;
	const what = hello
		? `contextfold ${hello.version ?? "(no version)"} (build ${hello.build ?? "unknown"}, protocol ${hello.protocol ?? "unknown"})`
		: "not a contextfold engine (no hello)";
	return `${found.bin} (from ${found.source}) is ${what}; this adapter is ${VERSION} (protocol ${PROTOCOL_VERSION}). Fix: ${fixFor(found)}`;
}

/** @param {Found} found */
function fixFor(found) {
	switch (found.source) {
		case "CONTEXTFOLD_BIN":
			return `point CONTEXTFOLD_BIN at a contextfold ${VERSION} binary, or unset it to use the package's own engine`;
		case "platform package":
			return `reinstall the package with its engine: ${reinstall(`${process.platform}-${process.arch}`)}`;
		case "package bin/":
			return `rebuild it: make build in ${PACKAGE_DIR}`;
		default:
			return `replace it with contextfold ${VERSION}, or set CONTEXTFOLD_BIN to a contextfold ${VERSION} binary`;
	}
}
