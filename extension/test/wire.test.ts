import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { applyPlacements, type Layer, Tracker, turnParams } from "../wire.ts";

const vectors = JSON.parse(readFileSync(new URL("../../internal/apply/testdata/vectors.json", import.meta.url), "utf8"));

test("substitutions serialise byte-identically to the Go apply", () => {
	assert.ok(vectors.length >= 5);
	for (const v of vectors) {
		const msgs = [structuredClone(v.message)];
		const layers = new Map<number, Layer>([[1, { seq: 1, entries: [{ id: "x", code: "c", text: v.text }] }]]);
		const n = applyPlacements(msgs, [[0, v.part, 1, 0]], layers);
		assert.equal(n, 1, v.name);
		assert.equal(JSON.stringify(msgs[0]), v.want, v.name);
	}
});

test("applyPlacements never touches tool calls, missing layers, or messages past the limit", () => {
	const msgs: any[] = [
		{ role: "assistant", content: [{ type: "toolCall", id: "c", name: "bash", arguments: {} }] },
		{ role: "toolResult", toolCallId: "c", content: [{ type: "text", text: "raw" }] },
		{ role: "user", content: "hi" },
	];
	const before = JSON.stringify(msgs);
	const layers = new Map<number, Layer>([[1, { seq: 1, entries: [{ id: "r:c", code: "c", text: "D" }] }]]);
	assert.equal(applyPlacements(msgs, [[0, 0, 1, 0], [1, -1, 9, 0], [2, -1, 1, 0]], layers), 0);
	assert.equal(applyPlacements(msgs, [[1, -1, 1, 0]], layers, 1), 0);
	assert.equal(JSON.stringify(msgs), before);
	assert.equal(applyPlacements(msgs, [[1, -1, 1, 0]], layers), 1);
	assert.deepEqual(msgs[1].content, [{ type: "text", text: "D" }]);
});

test("the tracker finds the first changed message", () => {
	const t = new Tracker();
	const mk = (): any[] => [
		{ role: "system", content: "prompt" },
		{ role: "user", content: [{ type: "text", text: "go" }], timestamp: 1 },
		{ role: "assistant", content: [{ type: "toolCall", id: "c1", name: "bash", arguments: { command: "ls" } }], timestamp: 2, responseId: "r1" },
		{ role: "toolResult", toolCallId: "c1", toolName: "bash", content: [{ type: "text", text: "out" }], isError: false, timestamp: 3 },
	];
	assert.equal(t.prefix(mk()), 0);
	t.commit(mk(), 0);
	assert.equal(t.prefix(mk()), 4, "identical clones match");
	const appended = [...mk(), { role: "user", content: "more", timestamp: 4 }];
	assert.equal(t.prefix(appended), 4);
	const edited = mk();
	edited[3].content[0].text = "ou!"; // same length, different bytes (EDGES 5)
	assert.equal(t.prefix(edited), 3);
	const compacted = [mk()[0], { role: "compactionSummary", summary: "s", timestamp: 9 }, mk()[3]];
	assert.equal(t.prefix(compacted), 1);
	assert.equal(t.prefix(mk().slice(0, 2)), 2, "a shorter list keeps its common prefix");
	t.commit(appended, 4);
	assert.equal(t.length, 5);
});

test("turn params carry each appended message stringified once", () => {
	const msgs = [{ a: 1 }, { b: "x\u2028" }, { c: [1] }];
	const p = JSON.parse(turnParams(msgs, 1, { window: 100, reported: null, full: undefined }));
	assert.deepEqual(p, { keep: 1, window: 100, reported: null, append: [{ b: "x\u2028" }, { c: [1] }] });
});
