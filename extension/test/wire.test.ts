import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { applyPlacements, fileRefs, type Layer, markAnchor, sameJSON, Tracker, turnParams } from "../wire.ts";

const vectors = JSON.parse(readFileSync(new URL("../../internal/core/apply/testdata/vectors.json", import.meta.url), "utf8"));

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
	edited[3].content[0].text = "ou!"; // same length, different bytes (docs/EDGES.md #5)
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

test("turn params name the messages the session file holds instead of sending them", () => {
	const msgs = [{ a: 1 }, { b: 2 }, { c: 3 }, { d: 4 }];
	const p = JSON.parse(turnParams(msgs, 0, { window: 100 }, { ids: ["e1", null, "e3"], version: 3 }));
	assert.deepEqual(p, { keep: 0, window: 100, fileVersion: 3, file: ["e1", null, "e3"], append: [{ b: 2 }, { d: 4 }] });
});

test("sameJSON is true only where JSON.stringify agrees", () => {
	const yes: [unknown, unknown][] = [
		[{ a: 1, b: [1, "x", null, { c: true }] }, { a: 1, b: [1, "x", null, { c: true }] }],
		[[undefined], [undefined]],
		[Object.create(null), {}],
		["é😀\u2028", "é😀\u2028"],
		[-0, 0],
	];
	for (const [a, b] of yes) {
		assert.equal(sameJSON(a, b), true, JSON.stringify(a));
		assert.equal(JSON.stringify(a), JSON.stringify(b));
	}
	class K {
		x = 1;
	}
	const no: [unknown, unknown][] = [
		[{ a: 1, b: 2 }, { b: 2, a: 1 }],
		[{ a: 1 }, { a: 1, b: undefined }],
		[{ a: undefined }, { a: undefined }],
		[{ a: 1 }, { a: "1" }],
		[[1, 2], [1, 2, 3]],
		[[1], { 0: 1 }],
		[new Date(0), new Date(0)],
		[new K(), { x: 1 }],
		[{ toJSON: () => 1 }, { toJSON: () => 1 }],
		[NaN, NaN],
		[Infinity, Infinity],
		[{ f() {} }, { f() {} }],
		[10n, 10n],
	];
	for (const [a, b] of no) assert.equal(sameJSON(a, b), false, String(a));
});

test("fileRefs pairs messages with the file's message entries Pi projects", () => {
	const entry = (id: string, message: any) => ({ type: "message", id, message });
	const e1 = entry("e1", { role: "user", content: "go", timestamp: 1 });
	const e2 = entry("e2", { role: "assistant", content: [{ type: "text", text: "ok" }], timestamp: 2 });
	const e3 = entry("e3", { role: "user", content: "again", timestamp: 3 });
	const summary = { sourceEntry: { type: "compaction", id: "c1" }, messages: [{ role: "compactionSummary", summary: "s", timestamp: 0 }] };
	const edited = { sourceEntry: e3, messages: [{ ...e3.message, content: "edited" }] };
	const sm = (entries: any[], file = "/s.jsonl", version: unknown = 3) => ({
		getSessionFile: () => file,
		getHeader: () => ({ version }),
		buildSessionProjection: () => ({ entries }),
	});
	const whole = (e: any) => ({ sourceEntry: e, messages: [e.message] });
	const msgs = structuredClone([summary.messages[0], e1.message, e2.message, e3.message]);
	assert.deepEqual(fileRefs(sm([summary, whole(e1), whole(e2), whole(e3)]), msgs), { ids: [null, "e1", "e2", "e3"], version: 3 });
	// A context_edit's projection, a changed message and the ones after the projection are sent.
	msgs[2].content[0].text = "changed";
	assert.deepEqual(fileRefs(sm([summary, whole(e1), whole(e2), edited]), [...msgs, { role: "user", content: "new" }]), { ids: [null, "e1"], version: 3 });
	assert.equal(fileRefs(sm([summary]), msgs), null, "nothing in the file");
	assert.equal(fileRefs(sm([whole(e1)], ""), msgs.slice(1)), null, "no session file");
	assert.equal(fileRefs(sm([whole(e1)], "/s.jsonl", null), msgs.slice(1)), null, "no format version");
	assert.equal(fileRefs({ getSessionFile: () => "/s.jsonl" }, msgs), null, "no projection");
	assert.equal(fileRefs({ getSessionFile: () => "/s.jsonl", getHeader: () => ({ version: 3 }), buildSessionProjection: () => { throw new Error("x"); } }, msgs), null);
});

/** An Anthropic Messages payload as Pi's provider builds it: breakpoints on the last tool, the system prompt and the last message. */
function anthropicPayload(ttl?: string): any {
	const cc = () => ({ type: "ephemeral", ...(ttl ? { ttl } : {}) });
	return {
		model: "claude",
		system: [{ type: "text", text: "sys", cache_control: cc() }],
		tools: [{ name: "read" }, { name: "bash", cache_control: cc() }],
		messages: [
			{ role: "user", content: "go" },
			{ role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "bash", input: {} }] },
			{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "{#abcdef FOLDED} digest" }] },
			{ role: "assistant", content: [{ type: "tool_use", id: "call|2", name: "bash", input: {} }] },
			{ role: "user", content: [{ type: "tool_result", tool_use_id: "call_2", content: "raw", cache_control: cc() }] },
		],
	};
}

function countMarks(p: any): number {
	return JSON.stringify(p).split('"cache_control"').length - 1;
}

test("markAnchor adds the fourth breakpoint on the frozen region's end, as Pi marks its own", () => {
	for (const ttl of [undefined, "1h"]) {
		const p = anthropicPayload(ttl);
		assert.equal(markAnchor(p, "toolu_1"), true);
		assert.deepEqual(p.messages[2].content[0].cache_control, { type: "ephemeral", ...(ttl ? { ttl } : {}) });
		assert.equal(countMarks(p), 4);
		assert.equal(markAnchor(p, "toolu_1"), false, "already marked");
	}
	// Pi's provider rewrites ids outside [a-zA-Z0-9_-]; the engine knows Pi's.
	const p = anthropicPayload();
	delete p.messages[4].content[0].cache_control;
	p.messages[4].content.push({ type: "text", text: "x", cache_control: { type: "ephemeral" } });
	assert.equal(markAnchor(p, "call|2"), true);
	assert.ok(p.messages[4].content[0].cache_control);
});

test("markAnchor leaves alone other wire formats, caching off, unknown ids, and a full payload it cannot free", () => {
	const openai = { model: "gpt", messages: [{ role: "tool", tool_call_id: "toolu_1", content: "x" }] };
	const before = JSON.stringify(openai);
	assert.equal(markAnchor(openai, "toolu_1"), false);
	assert.equal(JSON.stringify(openai), before);

	const off = anthropicPayload();
	off.system[0].cache_control = undefined;
	delete off.system[0].cache_control;
	delete off.tools[1].cache_control;
	delete off.messages[4].content[0].cache_control;
	assert.equal(markAnchor(off, "toolu_1"), false, "Pi sends no breakpoints: caching is off");
	assert.equal(countMarks(off), 0);

	assert.equal(markAnchor(anthropicPayload(), "toolu_9"), false);
	assert.equal(markAnchor(anthropicPayload(), ""), false);
	assert.equal(markAnchor(null, "toolu_1"), false);

	// Four already (OAuth: two system blocks): the tools' breakpoint gives way.
	const oauth = anthropicPayload();
	oauth.system.unshift({ type: "text", text: "You are Claude Code", cache_control: { type: "ephemeral" } });
	assert.equal(markAnchor(oauth, "toolu_1"), true);
	assert.equal(countMarks(oauth), 4);
	assert.equal(oauth.tools[1].cache_control, undefined);

	// Four, none of them the tools': nothing can give way.
	const full = anthropicPayload();
	delete full.tools[1].cache_control;
	full.system.unshift({ type: "text", text: "a", cache_control: { type: "ephemeral" } });
	full.messages[0].content = [{ type: "text", text: "go", cache_control: { type: "ephemeral" } }];
	const fullBefore = JSON.stringify(full);
	assert.equal(markAnchor(full, "toolu_1"), false);
	assert.equal(JSON.stringify(full), fullBefore);
});
