// Measures the time the adapter adds to Pi's requests, IPC included, against
// the real engine binary: steady state, fold events, engine cold start, the
// first request after resuming a session (folded by context-fold, or never
// folded), and engine RSS. Pi's own structuredClone of the transcript is not
// counted (it happens with or without the extension). BENCHMARKS.md defines
// each figure.
//
//   node extension/bench/adapter.bench.ts [--json] [--only=a,b] [--reps=N] [--keep=DIR]
//
// The resume and the steady60 sections run on Pi's own SessionManager
// (CONTEXTFOLD_PI_DIR, set by .ci/setup-pi.sh): a real session file on disk,
// and a ctx.getContextUsage() that computes what Pi's AgentSession computes.
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Session } from "../session.ts";

const argv = process.argv.slice(2);
const only = argv.find((a) => a.startsWith("--only="))?.slice(7).split(",");
const want = (name: string) => !only || only.includes(name);
const repsArg = Number(argv.find((a) => a.startsWith("--reps="))?.slice(7));
const REPS = Number.isFinite(repsArg) && repsArg > 0 ? repsArg : 15;
/** --engine-profile=DIR: each measured resume's engine writes a CPU profile there (CONTEXTFOLD_CPUPROFILE). */
const engineProfile = argv.find((a) => a.startsWith("--engine-profile="))?.slice(17);
/** --keep=DIR: the resume sections' session files are kept in DIR/<section>/ (to resume them in real Pi). */
const keepDir = argv.find((a) => a.startsWith("--keep="))?.slice(7);
/** --node-profile=DIR: a V8 CPU profile of the measured part of each section (open it in Chrome DevTools, or summarise it with extension/bench/cpuprofile-top.ts). */
const nodeProfile = argv.find((a) => a.startsWith("--node-profile="))?.slice(15);
const inspector = nodeProfile ? new (await import("node:inspector/promises")).Session() : null;
if (inspector) {
	inspector.connect();
	await inspector.post("Profiler.enable");
	await inspector.post("Profiler.setSamplingInterval", { interval: 100 });
}
/** Profiles fn's measured parts: call mark(true) before and mark(false) after each. */
async function profiled<T>(name: string, fn: (mark: (on: boolean) => Promise<void>) => Promise<T>): Promise<T> {
	if (!inspector) return fn(async () => {});
	const samples: any[] = [];
	const out = await fn(async (on) => {
		if (on) await inspector.post("Profiler.start");
		else samples.push(((await inspector.post("Profiler.stop")) as any).profile);
	});
	const { writeFileSync } = await import("node:fs");
	samples.forEach((prof, i) => writeFileSync(join(nodeProfile!, `${name}-${i}.cpuprofile`), JSON.stringify(prof)));
	return out;
}

function session(n: number): any[] {
	const out: any[] = [{ role: "system", content: "prompt", timestamp: 0 }, { role: "user", content: [{ type: "text", text: "work through the failing tests" }], timestamp: 1 }];
	for (let i = 0; out.length < n; i++) {
		const think = i % 3 === 0 ? [{ type: "thinking", thinking: "Consider the failing assertion and where it is raised. ".repeat(6), thinkingSignature: "sig" }] : [];
		out.push({ role: "assistant", content: [...think, { type: "toolCall", id: `toolu_${i}`, name: "bash", arguments: { command: `pytest tests/test_${i}.py` } }], timestamp: 10 + 2 * i, responseId: `r${i}`, stopReason: "toolUse", usage: { input: 10, output: 5, cacheRead: 0, cacheWrite: 0 } });
		const lines = Array.from({ length: 4 + ((i * 7) % 30) }, (_, k) => (k === 2 ? `ERROR: test_${i} failed at step ${k}` : `toolu_${i} line ${k}: the quick brown fox jumps over the lazy dog`));
		out.push({ role: "toolResult", toolCallId: `toolu_${i}`, toolName: "bash", content: [{ type: "text", text: lines.join("\n") }], isError: i % 11 === 0, timestamp: 11 + 2 * i });
	}
	return out.slice(0, n);
}

function ctxFor(dir: string, window: number, tokens: () => number | null): any {
	return {
		hasUI: false,
		ui: { notify() {} },
		model: { contextWindow: window },
		getContextUsage: () => ({ tokens: tokens(), contextWindow: window, percent: null }),
		sessionManager: { getSessionId: () => "bench", getSessionFile: () => undefined, getSessionDir: () => dir, getEntries: () => [] },
	};
}

const host = { appendEntry() {}, agentDir: "", compaction: () => undefined };
/** A model takes at least this long to answer; the engine uses the gap. */
const MODEL_LATENCY_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const ms = (x: number) => Math.round(x * 1000) / 1000;
const now = () => performance.now();
const dir = mkdtempSync(join(tmpdir(), "cf-bench-"));
const results: Record<string, unknown> = {};
const stats = (xs: number[]) => ({ p50_ms: ms(pct(xs, 50)), p95_ms: ms(pct(xs, 95)), max_ms: ms(Math.max(...xs)), n: xs.length });

// ---- Pi's own session machinery, for the resume and steady60 sections ----

const PI_DIR = process.env.CONTEXTFOLD_PI_DIR;
type Pi = { SessionManager: any; estimateProjectedContextTokens: any; getLatestCompactionEntry: any };
let piMods: Pi | null = null;
async function pi(): Promise<Pi> {
	if (piMods) return piMods;
	if (!PI_DIR) throw new Error("CONTEXTFOLD_PI_DIR is not set (run through `make bench-adapter`)");
	const sm = await import(join(PI_DIR, "dist/core/session-manager.js"));
	const cp = await import(join(PI_DIR, "dist/core/compaction/compaction.js"));
	piMods = { SessionManager: sm.SessionManager, getLatestCompactionEntry: sm.getLatestCompactionEntry, estimateProjectedContextTokens: cp.estimateProjectedContextTokens };
	return piMods;
}

/** Pi's settings as getSettings() returns them: a structuredClone per call. */
const PI_SETTINGS = {
	defaultProvider: "anthropic",
	defaultModel: "claude-sonnet-4-5",
	defaultThinkingLevel: "medium",
	compaction: { enabled: true, reserveTokens: 16384, keepRecentTokens: 20000 },
	retry: { enabled: true, maxRetries: 3, baseDelayMs: 2000 },
	packages: ["npm:pi-context-fold"],
	theme: "dark",
};

const MODEL = { api: "anthropic-messages", provider: "anthropic", id: "claude-sonnet-4-5" };

/**
 * The ExtensionContext Pi hands a handler, on a real SessionManager:
 * getContextUsage() does what AgentSession.getContextUsage() does (the
 * session projection, the branch, the latest compaction, the estimate).
 */
function piCtx(p: Pi, sm: any, window: number): any {
	return {
		hasUI: false,
		ui: { notify() {} },
		model: { ...MODEL, contextWindow: window },
		getContextUsage: () => {
			const projection = sm.buildSessionProjection();
			const branch = sm.getBranch();
			if (p.getLatestCompactionEntry(branch)) throw new Error("the bench sessions never compact");
			const est = p.estimateProjectedContextTokens(projection, branch);
			return { tokens: est.tokens, contextWindow: window, percent: (est.tokens / window) * 100 };
		},
		sessionManager: sm,
	};
}

function piHost(sm: any): any {
	return { appendEntry: (t: string, d: unknown) => sm.appendCustomEntry(t, d), agentDir: "", compaction: () => structuredClone(PI_SETTINGS).compaction };
}

/**
 * One Pi turn at wall-clock time t: the assistant's tool call, with the
 * provider's usage for a request of `prompt` tokens of which `cached` were
 * read from the cache, and its result of about `bytes` bytes.
 */
function piTurn(i: number, bytes: number, prompt: number, cached: number, t: number): [any, any] {
	const think = i % 3 === 0 ? [{ type: "thinking", thinking: "Consider the failing assertion and where it is raised. ".repeat(6), thinkingSignature: "sig" }] : [];
	const lines: string[] = [];
	for (let k = 0, n = 0; n < bytes; k++) {
		const l = k === 2 ? `ERROR: test_${i} failed at step ${k} (tests/test_${i}.py:${40 + k})` : `toolu_${i} line ${k}: the quick brown fox jumps over the lazy dog ${(i * 31 + k * 17) % 1000}`;
		lines.push(l);
		n += l.length + 1;
	}
	const cacheRead = Math.min(cached, prompt);
	const usage = { input: 3, output: 60, cacheRead, cacheWrite: Math.max(0, prompt - cacheRead - 3), totalTokens: prompt + 60, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
	return [
		{ role: "assistant", content: [...think, { type: "toolCall", id: `toolu_${i}`, name: "bash", arguments: { command: `pytest tests/test_${i}.py -x -q` } }], api: MODEL.api, provider: MODEL.provider, model: MODEL.id, usage, stopReason: "toolUse", timestamp: t, responseId: `msg_${i}` },
		{ role: "toolResult", toolCallId: `toolu_${i}`, toolName: "bash", content: [{ type: "text", text: lines.join("\n") }], isError: i % 11 === 0, timestamp: t + 800 },
	];
}

const SYSTEM = { role: "system", content: "You are a coding assistant running inside pi. ".repeat(120), timestamp: 0 };

/** Tokens of a request as the provider would report them (chars / 4). */
const tokensOf = (msgs: unknown[]) => Math.ceil(JSON.stringify(msgs).length / 4);

/** What index.ts sends on message_end for an assistant message. */
function usageParams(m: any): Record<string, unknown> {
	const u = m.usage;
	return { input: u.input, output: u.output, cacheRead: u.cacheRead, cacheWrite: u.cacheWrite, provider: m.provider, model: m.model, at: m.timestamp, stopReason: m.stopReason };
}

/**
 * A Pi session as it ran: a request per turn, on Pi's SessionManager, the
 * provider's usage the request's own size (its unchanged prefix read from the
 * cache), a turn every 4 s ending now. With a Session (fold) its fold entries
 * land in the file where they were committed; without one nothing folds.
 * Tool results are resultBytes(i) bytes.
 */
async function buildSession(p: Pi, n: number, window: number, fold: boolean, resultBytes: (i: number) => number): Promise<{ file: string; dir: string; bytes: number; folds: number; entries: number; messages: number }> {
	const sdir = mkdtempSync(join(tmpdir(), "cf-bench-sess-"));
	const sm = p.SessionManager.create(sdir, sdir);
	const turns = Math.ceil((n - 2) / 2);
	const t0 = Date.now() - turns * 4000;
	sm.appendMessage(SYSTEM);
	sm.appendMessage({ role: "user", content: [{ type: "text", text: "work through the failing tests" }], timestamp: t0 });
	const ctx = piCtx(p, sm, window);
	let events = 0;
	const h = piHost(sm);
	const s = fold ? new Session({ ...h, appendEntry: (t: string, d: any) => (events++, h.appendEntry(t, d)) }) : null;
	if (s) await s.start(ctx);
	let prompt = tokensOf(sm.buildSessionContext().messages);
	let cached = 0;
	let raw = prompt;
	for (let i = 0; i < turns; i++) {
		const [a, r] = piTurn(i, resultBytes(i), prompt, cached, t0 + 4000 * i + 2000);
		sm.appendMessage(a);
		if (s) await s.call(ctx, "usage", usageParams(a));
		sm.appendMessage(r);
		if (s) {
			// The request that carries this result, as Pi sends it.
			const req = structuredClone(sm.buildSessionContext().messages);
			const before = events;
			await s.onContext(req, ctx);
			cached = events === before ? prompt : 0;
			prompt = tokensOf(req);
		} else {
			raw += Math.ceil((JSON.stringify(a).length + JSON.stringify(r).length) / 4);
			cached = prompt;
			prompt = raw;
		}
	}
	s?.close();
	const file = sm.getSessionFile();
	const entries = sm.getEntries();
	const folds = entries.filter((e: any) => e.type === "custom" && e.customType === "contextfold.fold");
	const blocks = folds.reduce((k: number, e: any) => k + (e.data?.folds?.length ?? 0), 0);
	return { file, dir: sdir, bytes: statSync(file).size, folds: folds.length, entries: blocks, messages: sm.buildSessionContext().messages.length };
}

/** CPU time the process has used, in ms (every thread; Linux schedstat), or NaN. */
function cpuOf(pid: number | undefined): number {
	if (!pid) return NaN;
	try {
		let ns = 0;
		for (const t of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
		return ns / 1e6;
	} catch {
		return NaN;
	}
}

/**
 * Resumes a copy of a built session `reps` times. One sample: Session.start
 * (spawn, hello, open with the session's fold entries; the engine replays
 * them and reads the session file) through the first onContext's return, on
 * the messages Pi builds from the file (their clone not timed).
 */
async function resume(p: Pi, label: string, built: { file: string; dir: string }, window: number, reps: number, mark: (on: boolean) => Promise<void>) {
	const typed: number[] = [];
	for (let r = 0; r < reps; r++) typed.push(await typedFirst(p, built, window));
	const added: number[] = [];
	const starts: number[] = [];
	const firsts: number[] = [];
	const nodeCpu: number[] = [];
	const engineCpu: number[] = [];
	let folded = 0;
	for (let r = 0; r < reps; r++) {
		const copy = mkdtempSync(join(tmpdir(), "cf-bench-res-"));
		cpSync(built.dir, copy, { recursive: true });
		const file = join(copy, built.file.slice(built.dir.length + 1));
		const sm = p.SessionManager.open(file, copy);
		const msgs = structuredClone(sm.buildSessionContext().messages);
		const ctx = piCtx(p, sm, window);
		await sleep(20);
		if (engineProfile) process.env.CONTEXTFOLD_CPUPROFILE = join(engineProfile, `${label}-${r}.pprof`);
		await mark(true);
		const c0 = process.cpuUsage();
		const t0 = now();
		const s = new Session(piHost(sm));
		await s.start(ctx);
		const t1 = now();
		delete process.env.CONTEXTFOLD_CPUPROFILE;
		await s.onContext(msgs, ctx);
		const t2 = now();
		const c1 = process.cpuUsage(c0);
		engineCpu.push(cpuOf(s.enginePid));
		nodeCpu.push((c1.user + c1.system) / 1000);
		await mark(false);
		added.push(t2 - t0);
		starts.push(t1 - t0);
		firsts.push(t2 - t1);
		folded = msgs.filter((m: any) => m.role === "toolResult" && /^\{#[0-9a-z]{6} FOLDED\}/.test(m.content?.[0]?.text ?? "")).length;
		s.close();
		rmSync(copy, { recursive: true, force: true });
	}
	return { added: stats(added), typedFirst: stats(typed), start_p50_ms: ms(pct(starts, 50)), first_p50_ms: ms(pct(firsts, 50)), cpu_p50_ms: { node: ms(pct(nodeCpu, 50)), engine: ms(pct(engineCpu, 50)) }, foldedInFirstRequest: folded, foldedInTypedFirst: typedFolded };
}

/** What the user types in after `pi -c` opens the session, before the first request. */
const TYPING_MS = 1000;

/**
 * The interactive resume: Session.start at session_start, the user's first
 * message TYPING_MS later, and its request (the session's messages plus
 * that message). One sample: the first onContext alone.
 */
async function typedFirst(p: Pi, built: { file: string; dir: string }, window: number): Promise<number> {
	const copy = mkdtempSync(join(tmpdir(), "cf-bench-res-"));
	cpSync(built.dir, copy, { recursive: true });
	const sm = p.SessionManager.open(join(copy, built.file.slice(built.dir.length + 1)), copy);
	const ctx = piCtx(p, sm, window);
	const s = new Session(piHost(sm));
	await s.start(ctx);
	await sleep(TYPING_MS);
	sm.appendMessage({ role: "user", content: [{ type: "text", text: "go on with the next failing test" }], timestamp: Date.now() });
	const msgs = structuredClone(sm.buildSessionContext().messages);
	const t0 = now();
	await s.onContext(msgs, ctx);
	const t = now() - t0;
	s.close();
	rmSync(copy, { recursive: true, force: true });
	typedFolded = msgs.filter((m: any) => m.role === "toolResult" && /^\{#[0-9a-z]{6} FOLDED\}/.test(m.content?.[0]?.text ?? "")).length;
	return t;
}
/** Blocks folded in the last typedFirst request (the same as in the back-to-back one, or the preload lost folds). */
let typedFolded = 0;

// Cold start: spawn, hello, open.
if (want("coldStart")) {
	const times: number[] = [];
	for (let i = 0; i < 15; i++) {
		const s = new Session(host);
		const t0 = now();
		await s.start(ctxFor(dir, 200_000, () => null));
		times.push(now() - t0);
		s.close();
	}
	results.coldStart = { p50_ms: ms(pct(times, 50)), max_ms: ms(Math.max(...times)) };
}

// Steady state on a 1,000-message session that already carries a layer.
if (want("steady")) {
	const msgs = session(1000);
	const bytes = JSON.stringify(msgs).length;
	let tokens: number | null = 150_000;
	const ctx = ctxFor(dir, 200_000, () => tokens);
	const s = new Session(host);
	await s.start(ctx);
	await s.onContext(structuredClone(msgs), ctx); // folds once, full send
	await sleep(1000); // the model's answer: the engine digests ahead meanwhile
	tokens = 60_000;
	const times: number[] = [];
	let grown = msgs;
	for (let i = 0; i < 300; i++) {
		grown = [...grown, { role: "user", content: [{ type: "text", text: `next ${i}` }], timestamp: 100_000 + i }];
		const clone = structuredClone(grown);
		const t0 = now();
		await s.onContext(clone, ctx);
		times.push(now() - t0);
	}
	const rss = (() => {
		try {
			const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${s.enginePid}/status`, "utf8"));
			return m ? Number(m[1]) / 1024 : null;
		} catch {
			return null;
		}
	})();
	results.steady = { messages: msgs.length, mb: ms(bytes / 1e6), p50_ms: ms(pct(times, 50)), p95_ms: ms(pct(times, 95)), p99_ms: ms(pct(times, 99)), engine_rss_mb: rss && Math.round(rss) };
	s.close();
}

// Steady state as in Pi: 60 turns whose tool results are 5–40 KB, a request
// after each, on Pi's SessionManager (Pi's getContextUsage and getSettings
// run inside the handler, as they do in Pi), the usage of each response sent
// as index.ts sends it, 50 ms of model time between requests. Five sessions,
// 300 requests at a 200k window; the fold events the schedule commits are
// among them.
if (want("steady60")) {
	const p = await pi();
	const times: number[] = [];
	const nodeCpu: number[] = [];
	const engineCpu: number[] = [];
	let events = 0;
	let mb = 0;
	await profiled("steady60", async (mark) => {
	for (let run = 0; run < 5; run++) {
		const sdir = mkdtempSync(join(tmpdir(), "cf-bench-s60-"));
		const sm = p.SessionManager.create(sdir, sdir);
		const ctx = piCtx(p, sm, 200_000);
		const h = piHost(sm);
		let mine = 0;
		const s = new Session({ ...h, appendEntry: (t: string, d: any) => (mine++, h.appendEntry(t, d)) });
		const t0 = Date.now();
		sm.appendMessage(SYSTEM);
		sm.appendMessage({ role: "user", content: [{ type: "text", text: "work through the failing tests" }], timestamp: t0 });
		await s.start(ctx);
		let prompt = tokensOf(sm.buildSessionContext().messages);
		let cached = 0;
		for (let i = 0; i < 60; i++) {
			const size = 5_000 + ((i * 7919 + run * 104729) % 35_001);
			const [a, r] = piTurn(i, size, prompt, cached, Date.now());
			sm.appendMessage(a);
			await s.call(ctx, "usage", usageParams(a));
			sm.appendMessage(r);
			const req = structuredClone(sm.buildSessionContext().messages); // Pi's clone, not timed
			const before = mine;
			await mark(true);
			const e0 = cpuOf(s.enginePid);
			const c0 = process.cpuUsage();
			const t1 = now();
			await s.onContext(req, ctx);
			times.push(now() - t1);
			const c1 = process.cpuUsage(c0);
			engineCpu.push(cpuOf(s.enginePid) - e0);
			nodeCpu.push((c1.user + c1.system) / 1000);
			await mark(false);
			cached = mine === before ? prompt : 0;
			prompt = tokensOf(req);
			await sleep(50); // the model's answer
		}
		mb += JSON.stringify(sm.buildSessionContext().messages).length / 1e6 / 5;
		events += mine / 5;
		s.close();
		rmSync(sdir, { recursive: true, force: true });
	}
	});
	results.steady60 = { mb: ms(mb), foldEvents: events, ...stats(times), cpu_p50_ms: { node: ms(pct(nodeCpu, 50)), engine: ms(pct(engineCpu, 50)) } };
}

// Fold events: each sample is a fresh session whose request folds. The
// shipped schedule would fold this session's backlog on its first request,
// so the ladder profile holds it until the measured request, which then
// folds ~500 blocks at once: the mechanism's cost (lower, sha256, seed
// index, persist) depends on the blocks folded, not on the policy.
if (want("foldEvent")) {
	const msgs = session(1000);
	const times: number[] = [];
	process.env.CONTEXTFOLD_POLICY = "ladder";
	for (let i = 0; i < 15; i++) {
		let tokens = 10_000;
		const ctx = ctxFor(dir, 400_000, () => tokens);
		const s = new Session(host);
		await s.start(ctx);
		await s.onContext(structuredClone(msgs), ctx);
		await sleep(MODEL_LATENCY_MS);
		tokens = 190_000;
		const next = [...msgs, { role: "user", content: "go on", timestamp: 999_999 }];
		const clone = structuredClone(next);
		const t0 = now();
		await s.onContext(clone, ctx);
		times.push(now() - t0);
		s.close();
	}
	delete process.env.CONTEXTFOLD_POLICY;
	results.foldEvent = { p50_ms: ms(pct(times, 50)), max_ms: ms(Math.max(...times)) };
}

// Resume (`pi -c`) of a real Pi session file: one that context-fold folded
// as it ran (1,000 and 3,000 messages), and a cold one of 3,000 messages
// that never folded (run without context-fold, under its threshold).
// Window 1M: Pi would have compacted a 3.4 MB session at 200k.
const RESUME_WINDOW = 1_000_000;
const resultBytes = (i: number) => 300 + ((i * 7919) % 1_951);
for (const [name, n, fold] of [["resumeFolded1000", 1000, true], ["resumeFolded3000", 3000, true], ["resumeCold3000", 3000, false]] as const) {
	if (!want(name)) continue;
	const p = await pi();
	const built = await buildSession(p, n, RESUME_WINDOW, fold, resultBytes);
	const r = await profiled(name, (mark) => resume(p, name, built, RESUME_WINDOW, REPS, mark));
	results[name] = { messages: built.messages, file_mb: ms(built.bytes / 1e6), foldEntries: built.folds, foldedBlocks: built.entries, ...r };
	if (keepDir) cpSync(built.dir, join(keepDir, name), { recursive: true });
	rmSync(built.dir, { recursive: true, force: true });
}

if (argv.includes("--json")) console.log(JSON.stringify(results, null, 2));
else for (const [k, v] of Object.entries(results)) console.log(k.padEnd(16), JSON.stringify(v));
