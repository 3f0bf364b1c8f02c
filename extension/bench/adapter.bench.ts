// Measures the time the adapter adds to one Pi request, IPC included, on a
// 1,000-message (~1 MB) session: steady state, fold events, engine cold start,
// the first request after resuming a 3,000-message session, and engine RSS.
// Pi's own structuredClone of the transcript is not counted (it happens with
// or without the extension).
//
//   node extension/bench/adapter.bench.ts [--json]
import { readFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Session } from "../session.ts";

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

// Cold start: spawn, hello, open.
{
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
{
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
	results.steady = { messages: msgs.length, mb: ms(bytes / 1e6), p50_ms: ms(pct(times, 50)), p99_ms: ms(pct(times, 99)), engine_rss_mb: rss && Math.round(rss) };
	s.close();
}

// Fold events: each sample is a fresh session whose request folds. The
// shipped schedule would fold this session's backlog on its first request,
// so the ladder profile holds it until the measured request, which then
// folds ~500 blocks at once: the mechanism's cost (lower, sha256, seed
// index, persist) depends on the blocks folded, not on the policy.
{
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

// First request after resuming a 3,000-message session: the session folded
// before the restart (its entries replay at open), and the first request
// sends all 3,000 messages to a fresh engine.
{
	const msgs = session(3000);
	const entries: any[] = [];
	const rec = { appendEntry: (customType: string, data: unknown) => entries.push({ type: "custom", customType, data }), agentDir: "", compaction: () => undefined };
	const ctxA = ctxFor(dir, 1_000_000, () => 100_000);
	ctxA.sessionManager.getEntries = () => entries;
	const a = new Session(rec);
	await a.start(ctxA);
	await a.onContext(structuredClone(msgs), ctxA);
	a.close();
	const times: number[] = [];
	for (let i = 0; i < 8; i++) {
		const ctx = ctxFor(dir, 1_000_000, () => 100_000);
		ctx.sessionManager.getEntries = () => entries;
		const s = new Session(host);
		await s.start(ctx);
		const clone = structuredClone(msgs);
		const t0 = now();
		await s.onContext(clone, ctx);
		times.push(now() - t0);
		s.close();
	}
	results.resume3000 = { mb: ms(JSON.stringify(msgs).length / 1e6), replayedEntries: entries.length, p50_ms: ms(pct(times, 50)), max_ms: ms(Math.max(...times)) };
}

if (process.argv.includes("--json")) console.log(JSON.stringify(results, null, 2));
else for (const [k, v] of Object.entries(results)) console.log(k.padEnd(12), JSON.stringify(v));
