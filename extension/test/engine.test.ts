import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { PROTOCOL_VERSION, VERSION } from "../locate.js";
import { Engine, encodeFrame, FrameReader } from "../protocol.ts";
import { turnParams } from "../wire.ts";

const BIN = process.env.CONTEXTFOLD_BIN ?? fileURLToPath(new URL("../../bin/contextfold", import.meta.url));

function session(n: number): any[] {
	const out: any[] = [{ role: "user", content: [{ type: "text", text: "go" }], timestamp: 1 }];
	for (let i = 0; i < n; i++) {
		out.push({ role: "assistant", content: [{ type: "toolCall", id: `c${i}`, name: "bash", arguments: { command: `run ${i}` } }], timestamp: 10 + 2 * i, responseId: `r${i}`, stopReason: "toolUse" });
		const lines = Array.from({ length: 200 }, (_, k) => (k === 100 ? `ERROR: step ${i} failed` : `c${i} line ${k}: the quick brown fox`));
		out.push({ role: "toolResult", toolCallId: `c${i}`, toolName: "bash", content: [{ type: "text", text: lines.join("\n") }], isError: false, timestamp: 11 + 2 * i });
	}
	return out;
}

test("frames survive arbitrary chunking", () => {
	const r = new FrameReader();
	const bytes = Buffer.concat([encodeFrame('{"a":"é"}'), encodeFrame("{}")]);
	const got: string[] = [];
	for (let i = 0; i < bytes.length; i++) got.push(...r.push(bytes.subarray(i, i + 1)));
	assert.deepEqual(got, ['{"a":"é"}', "{}"]);
});

test("open, turn, persist round trip against the real engine", async () => {
	const persisted: any[] = [];
	const e = new Engine({ bin: BIN, onRequest: (m, p) => (m === "persist" ? (persisted.push(p), true) : null) });
	const hello = await e.ready;
	// The real engine's hello: this protocol, this package's version, its build and platform.
	assert.equal(hello.protocol, PROTOCOL_VERSION);
	assert.equal(hello.version, VERSION);
	assert.equal(typeof hello.build, "string");
	assert.equal(hello.platform, `${process.platform}-${process.arch}`);
	const dir = mkdtempSync(join(tmpdir(), "cf-"));
	await e.request("open", { sessionId: "s1", sessionDir: dir, entries: [] }, 5000);
	const msgs = session(30);
	const res = await e.requestRaw("turn", turnParams(msgs, 0, { window: 20000 }), 5000);
	assert.ok(res.event, "a 30-call session at a 20k window folds");
	assert.equal(persisted.length, 1, "the event was persisted through the adapter before it applied");
	assert.equal(persisted[0].customType, "contextfold.fold");
	assert.equal(persisted[0].data.kind, "fold");
	assert.ok(res.placements.length > 0);
	assert.equal(res.layers, undefined, "the layer's digests travelled once, in the persist request");
	const persistedLayer = {
		seq: persisted[0].data.seq,
		trigger: persisted[0].data.trigger,
		entries: persisted[0].data.folds.map((f: any) => ({ id: f.id, code: f.code, text: f.digest })),
	};
	// Steady state: nothing new, nothing resent.
	const again = await e.requestRaw("turn", turnParams(msgs, msgs.length, { window: 20000 }), 5000);
	assert.equal(again.placements, undefined);
	assert.equal(again.layers, undefined);
	// A restart replays the persisted entry and rebuilds the same layer.
	e.close();
	const e2 = new Engine({ bin: BIN, onRequest: () => true });
	await e2.ready;
	const open = await e2.request("open", { sessionId: "s1", sessionDir: dir, entries: persisted.map((p) => p.data) }, 5000);
	assert.deepEqual(open.layers, [persistedLayer], "replay rebuilds the layer the adapter built from persist");
	e2.close();
});

test("a crash fails pending requests and reports once", async () => {
	let exits = 0;
	let persistAsked!: () => void;
	const asked = new Promise<void>((r) => (persistAsked = r));
	// The adapter never answers persist, so the turn is in flight when the engine dies.
	const e = new Engine({ bin: BIN, onRequest: () => (persistAsked(), new Promise(() => {})), onExit: () => exits++ });
	await e.ready;
	await e.request("open", { sessionId: "s", entries: [] }, 5000);
	const pending = e.requestRaw("turn", turnParams(session(30), 0, { window: 20000 }), 5000);
	await asked;
	process.kill(e.pid!, "SIGKILL");
	await assert.rejects(pending, (err: any) => err.code === "closed");
	await new Promise((r) => setTimeout(r, 50));
	assert.equal(exits, 1);
	assert.equal(e.alive, false);
	await assert.rejects(e.request("status", null, 1000), (err: any) => err.code === "closed");
});

test("a hung engine times out instead of blocking Pi", async () => {
	const dir = mkdtempSync(join(tmpdir(), "cf-"));
	const script = join(dir, "hang.mjs");
	// Says hello, then never answers.
	writeFileSync(script, `const b=Buffer.from(JSON.stringify({method:"hello",params:{protocol:2,version:"x"}}));const h=Buffer.alloc(4);h.writeUInt32LE(b.length);process.stdout.write(Buffer.concat([h,b]));process.stdin.resume();`);
	const e = new Engine({ bin: process.execPath, args: [script], onRequest: () => true });
	await e.ready;
	const t0 = Date.now();
	await assert.rejects(e.request("turn", {}, 300), (err: any) => err.code === "timeout");
	assert.ok(Date.now() - t0 < 2000);
	e.kill();
});

test("a wrong protocol version is refused", async () => {
	const dir = mkdtempSync(join(tmpdir(), "cf-"));
	const script = join(dir, "v2.mjs");
	writeFileSync(script, `const b=Buffer.from(JSON.stringify({method:"hello",params:{protocol:99}}));const h=Buffer.alloc(4);h.writeUInt32LE(b.length);process.stdout.write(Buffer.concat([h,b]));process.stdin.resume();`);
	const e = new Engine({ bin: process.execPath, args: [script], onRequest: () => true });
	await assert.rejects(e.ready, (err: any) => err.code === "version");
});

test("an idle engine does not keep Node alive", () => {
	const dir = mkdtempSync(join(tmpdir(), "cf-"));
	const script = join(dir, "idle.mjs");
	const proto = fileURLToPath(new URL("../protocol.ts", import.meta.url));
	writeFileSync(script, `import { Engine } from ${JSON.stringify(proto)};
const e = new Engine({ bin: ${JSON.stringify(BIN)}, onRequest: () => true });
await e.ready;
await e.request("status", null, 5000);
console.log("idle");`);
	const t0 = Date.now();
	const r = spawnSync(process.execPath, [script], { timeout: 10_000, encoding: "utf8" });
	assert.equal(r.status, 0, r.stderr);
	assert.equal(r.stdout.trim(), "idle");
	assert.ok(Date.now() - t0 < 5000, "Node exited while the engine child was still running");
});
