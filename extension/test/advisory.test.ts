import assert from "node:assert/strict";
import { test } from "node:test";
import { CacheWarning } from "../advisory.ts";

test("a failing cache advisory warns once per cause, not after every turn", async () => {
	const notes: string[] = [];
	const ctx: any = {
		hasUI: true,
		mode: "tui",
		isIdle: () => true,
		model: { provider: "p", id: "m" },
		getContextUsage: () => ({ tokens: 1000 }),
		ui: { notify: (t: string) => notes.push(t) },
	};
	let cause = "engine exited (code 1)";
	const w = new CacheWarning(async () => {
		throw Object.assign(new Error(cause), { code: "closed" });
	});
	for (let i = 0; i < 5; i++) await w.refresh(ctx);
	cause = "engine did not answer forecast within 30000 ms";
	for (let i = 0; i < 3; i++) await w.refresh(ctx);
	assert.deepEqual(notes, ["Cache advisory unavailable: engine exited (code 1)", "Cache advisory unavailable: engine did not answer forecast within 30000 ms"]);
	// No engine this session: said once at the start, never by the advisory.
	const off = new CacheWarning(async () => {
		throw Object.assign(new Error("no engine"), { code: "unavailable" });
	});
	await off.refresh(ctx);
	assert.equal(notes.length, 2);
});
