import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { reportArgs, reportPath, writeReport } from "../report.ts";

const BIN = process.env.CONTEXTFOLD_BIN ?? fileURLToPath(new URL("../../bin/contextfold", import.meta.url));
// The real pi-mono session with the fold entries the engine writes (internal/bench/htmlreport/piread).
const SESSION = fileURLToPath(new URL("../../internal/bench/htmlreport/piread/testdata/folded-session.jsonl", import.meta.url));

test("the report's arguments name the page, the window when known, and the session file", () => {
	const t = { sessionFile: "/s/a.jsonl", sessionDir: "/s", sessionId: "abc", window: 200_000 };
	assert.equal(reportPath(t), join("/s", "context-fold", "abc", "report-abc.html"));
	assert.deepEqual(reportArgs(t), ["report", "-o", reportPath(t), "-window", "200000", "/s/a.jsonl"]);
	assert.deepEqual(reportArgs({ ...t, window: 0, reserve: -1 }), ["report", "-o", reportPath(t), "/s/a.jsonl"]);
	assert.deepEqual(reportArgs({ ...t, reserve: -1, budget: 150_000 }), ["report", "-o", reportPath(t), "-window", "200000", "-reserve", "-1", "-budget", "150000", "/s/a.jsonl"]);
});

test("the real engine writes the current session's page where the command says", async () => {
	const dir = mkdtempSync(join(tmpdir(), "cf-report-"));
	const file = join(dir, "2026-01-01_5fd1e58c.jsonl");
	copyFileSync(SESSION, file);
	const t = { sessionFile: file, sessionDir: dir, sessionId: "5fd1e58c", window: 200_000 };
	const path = await writeReport(BIN, t);
	assert.equal(path, reportPath(t));
	const page = readFileSync(path, "utf8");
	assert.match(page, /^<!DOCTYPE html>/);
	assert.ok(page.includes('<g class="limit window" data-tokens="200000"'), "the window line is drawn");
	assert.ok(page.includes('<g class="marker fold"'), "fold events are marked");
	assert.ok(!/https?:\/\//.test(page), "nothing outside the page");
	// A file that is no session: the engine's one line is the error.
	await assert.rejects(writeReport(BIN, { ...t, sessionFile: join(dir, "none.jsonl") }), /no such file/);
});
