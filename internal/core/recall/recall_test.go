package recall

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

const (
	emoji   = "😀" // two UTF-16 units
	clipTag = " chars — grep=<term> targets content inside it]"
)

func rep(s string, n int) string { return strings.Repeat(s, n) }

// numbered returns lines first..last, each "<n>: " + body(n).
func numbered(first, last int, body func(int) string) string {
	var s []string
	for i := first; i <= last; i++ {
		s = append(s, fmt.Sprintf("%d: %s", i, body(i)))
	}
	return strings.Join(s, "\n")
}

func joinLines(n int, line func(int) string) string {
	var s []string
	for i := 1; i <= n; i++ {
		s = append(s, line(i))
	}
	return strings.Join(s, "\n")
}

func TestClipLine(t *testing.T) {
	alpha := "abcdefghijklmnopqrst"
	// A pair at units 10-11 between runs of ASCII.
	pair := rep("x", 10) + emoji + rep("y", 10)
	for _, tc := range []struct {
		line          string
		limit, around int
		want          string
	}{
		{"short", 10, -1, "short"},
		{"", 0, -1, ""},
		{alpha, 20, 19, alpha},
		{alpha, 5, -1, "abcde…[line clipped: 20" + clipTag},
		{alpha, 10, 5, "abcdefghij…[line clipped: 20" + clipTag},      // anchor in the first half: head
		{alpha, 10, 6, "[…line chars 2-11 of 20…] bcdefghijk…"},       // just past it: a window
		{alpha, 10, 12, "[…line chars 8-17 of 20…] hijklmnopq…"},      // centred
		{alpha, 10, 19, "[…line chars 11-20 of 20…] klmnopqrst…"},     // held inside the line
		{alpha, 10, 500, "[…line chars 11-20 of 20…] klmnopqrst…"},    // anchor past the end
		{alpha, 0, -1, "…[line clipped: 20" + clipTag},                // no budget
		{alpha, -3, 4, "…[line clipped: 20" + clipTag},                // negative budget is none
		{"ab" + emoji + "cd", 3, -1, "ab…[line clipped: 6" + clipTag}, // head cut would split the pair: dropped whole
		{"ab" + emoji + "cd", 4, -1, "ab" + emoji + "…[line clipped: 6" + clipTag},
		{pair, 6, 14, "[…line chars 13-18 of 22…] yyyyyy…"}, // window start inside the pair: moves past it
		{pair, 3, 9, "[…line chars 9-10 of 22…] xx…"},       // window end inside the pair: drops it
		{pair, 4, 11, "[…line chars 10-13 of 22…] x" + emoji + "y…"},
		{"a\xed\xa0\x80" + rep("b", 10), 4, -1, "a\xed\xa0\x80bb…[line clipped: 12" + clipTag}, // a lone surrogate in the input is one unit, kept
	} {
		if got := ClipLine(tc.line, tc.limit, tc.around); got != tc.want {
			t.Errorf("ClipLine(%q, %d, %d)\n got %q\nwant %q", tc.line, tc.limit, tc.around, got, tc.want)
		}
	}
}

func TestWhole(t *testing.T) {
	long := rep("x", 40000)
	hundred := joinLines(100, func(int) string { return rep("x", 100) })
	astral := "a" + rep(emoji, 5000) // 10001 units: the 7200-unit cut falls inside a pair
	for _, tc := range []struct {
		name, text, want, note string
	}{
		{"under the cap", "a\nb", "a\nb", ""},
		{"empty", "", "", ""},
		{"exactly the cap", rep("x", 8000), rep("x", 8000), ""},
		{"a line under the cap rides whole", rep("x", 7999) + "\n", rep("x", 7999) + "\n", ""},
		{"over the cap", hundred, joinLines(76, func(int) string { return rep("x", 100) }),
			"result is ~2525 tok; showing lines 1-76 of 100 (~2000 tok cap) — use lines=<a-b> or grep=<term> for the rest"},
		{"one 40 KB line is clipped", long, rep("x", 7200) + "…[line clipped: 40000 chars, chars 1-40000 — read on with chars=7201-14400]",
			"result is ~10000 tok; showing lines 1-1 of 1 (~2000 tok cap) · LONG LINE CLIPPED: line 1 is chars 1-40000; read it with chars=1-7200, then on, or grep=<term> inside it"},
		{"a long line after the cap still marks the read", rep("x", 7000) + "\n" + long + "\n" + long, rep("x", 7000),
			"result is ~21751 tok; showing lines 1-1 of 3 (~2000 tok cap) · LONG LINE CLIPPED: line 2 is chars 7002-47001; read it with chars=7002-14201, then on, or grep=<term> inside it"},
		{"a clip never splits a pair", astral, "a" + rep(emoji, 3599) + "…[line clipped: 10001 chars, chars 1-10001 — read on with chars=7200-10001]",
			"result is ~2501 tok; showing lines 1-1 of 1 (~2000 tok cap) · LONG LINE CLIPPED: line 1 is chars 1-10001; read it with chars=1-7200, then on, or grep=<term> inside it"},
		{"the first long line is named, at its place after astral lines", emoji + "\n" + long + "\n" + long, emoji + "\n" + rep("x", 7200) + "…[line clipped: 40000 chars, chars 4-40003 — read on with chars=7204-14403]",
			"result is ~20001 tok; showing lines 1-2 of 3 (~2000 tok cap) · LONG LINE CLIPPED: line 2 is chars 4-40003; read it with chars=4-7203, then on, or grep=<term> inside it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := Whole(tc.text)
			if got != tc.want || note != tc.note {
				t.Errorf("Whole:\n got %.200q\nnote %q\nwant %.200q\nnote %q", got, note, tc.want, tc.note)
			}
			if !utf8.ValidString(got) {
				t.Error("invalid UTF-8 (a lone surrogate) in the output")
			}
		})
	}
}

func TestLines(t *testing.T) {
	five := "l1\nl2\nl3\nl4\nl5"
	thousand := joinLines(1000, func(int) string { return rep("x", 40) })
	long := "a\n" + rep("x", 40000) + "\nc"
	for _, tc := range []struct {
		text, spec, source, want, note string
	}{
		{five, "2-4", SourceLedger, "2: l2\n3: l3\n4: l4", "lines 2-4 of 5"},
		{five, " 2 - 4 ", SourceLedger, "2: l2\n3: l3\n4: l4", "lines 2-4 of 5"},
		{five, "\u00a02-2\u3000\n", SourceLedger, "2: l2", "lines 2-2 of 5"}, // JavaScript's \s
		{five, "02-003", SourceLedger, "2: l2\n3: l3", "lines 2-3 of 5"},
		{five, "0-2", SourceLedger, "1: l1\n2: l2", "lines 1-2 of 5"},                    // clamped up
		{five, "4-99", SourceFullOutput, "4: l4\n5: l5", "lines 4-5 of 5 (full output)"}, // clamped down
		{five, "7-9", SourceLedger, "", "empty range 7-5 (session file has 5 lines)"},
		{five, "0-0", SourceLedger, "", "empty range 1-0 (session file has 5 lines)"},
		{five, "1-99999999999999999999999", SourceLedger, "1: l1\n2: l2\n3: l3\n4: l4\n5: l5", "lines 1-5 of 5"},
		// One line definition (digest.SplitLines): the empty text has no
		// lines, and a final newline ends the last line, starting none.
		{"", "1-1", SourceLedger, "", "empty range 1-0 (session file has 0 lines)"},
		{"a\n", "1-5", SourceLedger, "1: a", "lines 1-1 of 1"},
		{"a\r\nb\r\n", "1-5", SourceLedger, "1: a\r\n2: b\r", "lines 1-2 of 2"},
		{"\n", "1-5", SourceLedger, "1: ", "lines 1-1 of 1"},
		{"a\n\n", "1-5", SourceLedger, "1: a\n2: ", "lines 1-2 of 2"},
		{thousand, "1-1000", SourceFullOutput, numbered(1, 161, func(int) string { return rep("x", 40) }),
			"lines 1-161 of 1-1000 requested (full output, ~2000 tok cap) — narrow the range or grep"},
		{long, "2-2", SourceLive, "2: " + rep("x", 7200) + "…[line clipped: 40000 chars, chars 3-40002 — read on with chars=7203-14402]",
			"lines 2-2 of 2-2 requested (~2000 tok cap, long line clipped) — line 2 is chars 3-40002; read it with chars=3-7202, then on"},
		{long, "1-3", SourceLedger, "1: a\n2: " + rep("x", 7200) + "…[line clipped: 40000 chars, chars 3-40002 — read on with chars=7203-14402]\n3: c",
			"lines 1-3 of 1-3 requested (~2000 tok cap, long line clipped) — line 2 is chars 3-40002; read it with chars=3-7202, then on"},
		// chars= does not read a full output file: no positions in it.
		{long, "2-3", SourceFullOutput, "2: " + rep("x", 7200) + "…[line clipped: 40000" + clipTag + "\n3: c",
			"lines 2-3 of 2-3 requested (full output, ~2000 tok cap, long line clipped) — grep=<term> reaches inside the long line (chars=<a-b> reads the folded block, not the full output)"},
		// Over the cap as well: both hints.
		{long + "\n" + long, "2-5", SourceLedger, "2: " + rep("x", 7200) + "…[line clipped: 40000 chars, chars 3-40002 — read on with chars=7203-14402]\n3: c\n4: a",
			"lines 2-4 of 2-5 requested (~2000 tok cap, long line clipped) — narrow the range or grep; line 2 is chars 3-40002; read it with chars=3-7202, then on"},
	} {
		got, note := Lines(tc.text, tc.spec, tc.source)
		if got != tc.want || note != tc.note {
			t.Errorf("Lines(%.20q, %q):\n got %.200q\nnote %q\nwant %.200q\nnote %q", tc.text, tc.spec, got, note, tc.want, tc.note)
		}
	}
	// Malformed: not two numbers, or the start after the end (a range
	// that could hold no line of any block).
	for _, spec := range []string{"", "abc", "3", "3-", "-3", "1-2-3", "1–3", "1.5-2", "+1-2", "1 2", "١-٢", "1-2x", "0x1-2", "3-2", "99999999999999999999999-1"} {
		got, note := Lines(five, spec, SourceLedger)
		want := `malformed lines="` + spec + `": want "start-end", two line numbers with start ≤ end, e.g. lines=40-80 — nothing returned`
		if got != "" || note != want || ValidLines(spec) {
			t.Errorf("Lines(%q) = %q, %q (valid %v)", spec, got, note, ValidLines(spec))
		}
	}
	for _, spec := range []string{"2-4", " 2 - 4 ", "0-2", "7-9", "0-0", "5-5"} {
		if !ValidLines(spec) {
			t.Errorf("ValidLines(%q) = false", spec)
		}
	}
}

func TestGrep(t *testing.T) {
	text := "alpha\nBeta error\ngamma\nERROR: boom\ndelta"
	many := joinLines(200, func(int) string { return "error " + rep("x", 60) })
	needle := rep("a", 1000) + "NEEDLE" + rep("b", 1000)
	for _, tc := range []struct {
		text, term, source, want, note string
	}{
		{text, "error", SourceLedger, "2: Beta error\n4: ERROR: boom", `2 matches for "error"`},
		{text, "GAMMA", SourceLedger, "3: gamma", `1 match for "GAMMA"`},
		{text, "zzz", SourceLedger, "", `no lines match "zzz" (searched session file, 5 lines)`},
		{"", "x", SourceFullOutput, "", `no lines match "x" (searched full output, 0 lines)`},
		{"a\n", "x", SourceFullOutput, "", `no lines match "x" (searched full output, 1 line)`},
		{"Ünïcode\nplain", "üNÏ", SourceLedger, "1: Ünïcode", `1 match for "üNÏ"`},
		{text, "", SourceLedger, "1: alpha\n2: Beta error\n3: gamma\n4: ERROR: boom\n5: delta", `5 matches for ""`},
		{many, "ERROR", SourceFullOutput, numbered(1, 26, func(int) string { return "error " + rep("x", 60) }),
			`26 of 200 matches for "ERROR" (full output) — narrow your query or use lines=<a-b>`},
		{"x\n" + needle, "needle", SourceLive, "2: […chars=843-1162, line chars 841-1160 of 2006…] " + rep("a", 160) + "NEEDLE" + rep("b", 154) + "…",
			`1 match for "needle"`},
		// Astral characters before the match count two units each…
		{rep(emoji, 200) + "key" + rep("z", 300), "KEY", SourceLedger,
			"1: […chars=241-560, line chars 241-560 of 703…] " + rep(emoji, 80) + "key" + rep("z", 157) + "…", `1 match for "KEY"`},
		// …and a window that would start inside one starts after it.
		{"a" + rep(emoji, 200) + "xkey" + rep("z", 300), "key", SourceLedger,
			"1: […chars=244-563, line chars 244-563 of 705…] " + rep(emoji, 79) + "xkey" + rep("z", 158) + "…", `1 match for "key"`},
		// A match at the head of a long line keeps the head.
		{"key" + rep("z", 1000), "key", SourceLedger, "1: key" + rep("z", 317) + "…[line clipped: 1003 chars, chars 1-1003 — read on with chars=321-1003]", `1 match for "key"`},
		// In a full output file, which chars= does not read, windows and
		// marks give the position in the line only.
		{"x\n" + needle, "needle", SourceFullOutput, "2: […line chars 841-1160 of 2006…] " + rep("a", 160) + "NEEDLE" + rep("b", 154) + "…",
			`1 match for "needle" (full output)`},
		{"key" + rep("z", 1000), "key", SourceFullOutput, "1: key" + rep("z", 317) + "…[line clipped: 1003" + clipTag, `1 match for "key" (full output)`},
	} {
		got, note := Grep(tc.text, tc.term, tc.source)
		if got != tc.want || note != tc.note {
			t.Errorf("Grep(%.30q, %q):\n got %.300q\nnote %q\nwant %.300q\nnote %q", tc.text, tc.term, got, note, tc.want, tc.note)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Grep(%.30q, %q): invalid UTF-8 in the output", tc.text, tc.term)
		}
	}
}

func TestSlice(t *testing.T) {
	text := "one\ntwo error\nthree"
	for _, tc := range []struct {
		o          Options
		want, note string
		partial    bool
	}{
		{Options{}, text, "", false},
		{Options{Grep: "error"}, "2: two error", `1 match for "error"`, true},
		{Options{Lines: "3-3"}, "3: three", "lines 3-3 of 3", true},
		{Options{Lines: "1-1", Grep: "error"}, "1: one", "lines 1-1 of 3", true}, // lines wins
		{Options{Chars: "5-7"}, "two", "chars 5-7 of 19 — next: chars=8-19", false},
		// chars wins, and reads the block: not a partial read of a full output
		{Options{Chars: "1-3", Lines: "2-2", Grep: "error"}, "one", "chars 1-3 of 19 — next: chars=4-19", false},
	} {
		got, note := Slice(text, tc.o, SourceLedger)
		if got != tc.want || note != tc.note || tc.o.Partial() != tc.partial {
			t.Errorf("Slice(%+v) = %q, %q", tc.o, got, note)
		}
	}
}

func TestSearch(t *testing.T) {
	blocks := []Block{
		{Code: "aaaaaa", Label: LiveLabel("tool_result", "bash", 2, 0), Text: "ok\nerror: one\nfine"},
		{Code: "bbbbbb", Label: CompactedLabel("bash"), Note: Verified, Text: "nothing"},
		{Code: "cccccc", Label: LiveLabel("tool_result", "read", 5, 1), Note: Fallback(WhyMismatch("cccccc")), Text: "ERROR two\nerror three"},
	}
	hits, truncated, note := Search(blocks, "error", ToolArgs)
	if truncated || note != "3 matching lines across 2 of 3 folded blocks" || len(hits) != 2 {
		t.Fatalf("Search = %v %q %d", truncated, note, len(hits))
	}
	want := `search "error" — 3 matching lines across 2 of 3 folded blocks

=== aaaaaa (tool_result bash · turn 2) ===
2: error: one

=== cccccc (tool_result read · turn 5 (+1)) — the session file's text for #cccccc failed the fold-time sha256 check — served from live history ===
1: ERROR two
2: error three`
	if got := RenderSearch("error", hits, note, nil); got != want {
		t.Errorf("RenderSearch:\n%s\nwant\n%s", got, want)
	}

	hits, _, note = Search(blocks, "NOTHING", ToolArgs)
	if got := RenderSearch("NOTHING", hits, note, nil); got != `search "NOTHING" — 1 matching line across 1 of 3 folded blocks

=== bbbbbb (bash · session file (compacted out of view)) — sha256 verified ===
1: nothing` {
		t.Errorf("one hit:\n%s", got)
	}
	hits, _, note = Search(blocks, "zzz", ToolArgs)
	if got := RenderSearch("zzz", hits, note, nil); got != `search "zzz" — no matching lines in any folded block (0 matching lines across 0 of 3 folded blocks)` {
		t.Errorf("no hit: %s", got)
	}
	// Unverified hits are named where the answer starts, as well as in
	// their block's line; blocks left out are warned of.
	blocks[0].Note, blocks[0].Unverified = Mismatch, true
	hits, _, note = Search(blocks, "error", ToolArgs)
	if got := RenderSearch("error", hits, note, []string{NotSearched("dddddd", WhyMismatch("dddddd"))}); got != `search "error" — 3 matching lines across 2 of 3 folded blocks · ⚠ lines from 1 block are UNVERIFIED (not known to be the folded bytes): aaaaaa
⚠ dddddd — not searched: the session file's text for #dddddd failed the fold-time sha256 check

=== aaaaaa (tool_result bash · turn 2) — ⚠ UNVERIFIED: this text failed the fold-time sha256 check — it is not the folded bytes ===
2: error: one

=== cccccc (tool_result read · turn 5 (+1)) — the session file's text for #cccccc failed the fold-time sha256 check — served from live history ===
1: ERROR two
2: error three` {
		t.Errorf("unverified:\n%s", got)
	}
	hits, _, note = Search(blocks, "zzz", ToolArgs)
	if got := RenderSearch("zzz", hits, note, []string{"2 compacted blocks not searched: no readable session file"}); got != `search "zzz" — no matching lines in the folded blocks searched (0 matching lines across 0 of 3 folded blocks)
⚠ 2 compacted blocks not searched: no readable session file` {
		t.Errorf("no hit, blocks left out:\n%s", got)
	}
	if _, _, note := Search(nil, "x", ToolArgs); note != "0 matching lines across 0 of 0 folded blocks" {
		t.Errorf("no blocks: %s", note)
	}

	// One cap across every block: 19 tokens a hit line, 52 fit in 1000.
	thirty := joinLines(30, func(int) string { return "error " + rep("x", 60) })
	var many []Block
	for _, c := range []string{"b1", "b2", "b3"} {
		many = append(many, Block{Code: c, Label: "l", Text: thirty})
	}
	hits, truncated, note = Search(many, "error", ToolArgs)
	if !truncated || note != "capped at ~1000 tok — narrow the term, or follow up with recall_folded code={code} lines=<a-b>" ||
		len(hits) != 2 || len(hits[0].Lines) != 30 || len(hits[1].Lines) != 22 || hits[1].Lines[21] != "22: error "+rep("x", 60) {
		t.Errorf("capped: %v %q %d", truncated, note, len(hits))
	}

	// A hit deep inside a 40 KB line is a centred window.
	hits, _, _ = Search([]Block{{Code: "d", Label: "l", Text: rep("q", 20000) + "needle" + rep("q", 20000)}}, "NEEDLE", ToolArgs)
	if got := hits[0].Lines[0]; got != "1: […chars=19841-20160, line chars 19841-20160 of 40006…] "+rep("q", 160)+"needle"+rep("q", 154)+"…" {
		t.Errorf("window: %.80q", got)
	}
}

func TestLabelsAndRoutes(t *testing.T) {
	// What each route says it served (docs/EDGES.md #24).
	_, slice := Lines("a\nb", "1-2", SourceLedger)
	for _, tc := range []struct{ got, want string }{
		{LiveLabel("tool_result", "bash", 3, 0), "tool_result bash · turn 3"},
		{LiveLabel("thinking", "", 1, 2), "thinking · turn 1 (+2)"},
		{LedgerLabel("bash"), "bash · session file"},
		{CompactedLabel("read"), "read · session file (compacted out of view)"},
		{ParentLabel("bash"), "bash · parent session"},
		// a verified session-file block
		{Notes(Verified, slice), "sha256 verified · lines 1-2 of 2"},
		// an unverified legacy record
		{Notes(Legacy, slice), "unverified (legacy record without a fold-time sha256) · lines 1-2 of 2"},
		// a live block served because the session file failed its check
		{Notes(Fallback(WhyMismatch("abc123")), ""), "the session file's text for #abc123 failed the fold-time sha256 check — served from live history"},
		{Notes(Fallback(WhyNotFound("abc123"))), "block for #abc123 was not found in the session file — served from live history"},
		{Notes(Fallback(WhyNoLedger("abc123"))), "no readable session file for #abc123 — served from live history"},
		// a truncated view: the full output is gone
		{Notes(Verified, FullOutputGone, "1 match for \"x\""), "sha256 verified · full output file unreadable — searched the truncated result · 1 match for \"x\""},
		{Unavailable(WhyMismatch("abc123")), "recall unavailable — the session file's text for #abc123 failed the fold-time sha256 check"},
		{Notes("", ""), ""},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
}

func TestRenderRecall(t *testing.T) {
	matches := []Match{
		{Code: "abc123", Label: LedgerLabel("bash"), Note: Notes(Verified, "lines 1-2 of 9"), Text: "1: a\n2: b"},
		{Code: "def456", Label: LiveLabel("tool_result", "bash", 3, 0), Text: "hello"},
	}
	failures := []Failure{{Code: "ghi789", Message: Unavailable(WhyNotFound("ghi789"))}}
	missing := []string{"{#zzzzzz FOLDED}"}
	want := `✓ abc123 — bash · session file · sha256 verified · lines 1-2 of 9
✓ def456 — tool_result bash · turn 3
⚠ ghi789 — recall unavailable — block for #ghi789 was not found in the session file
✗ {#zzzzzz FOLDED} — no folded block with that code

=== abc123 (bash · session file) — sha256 verified · lines 1-2 of 9 ===
1: a
2: b

=== def456 (tool_result bash · turn 3) ===
hello`
	if got := RenderRecall(matches, failures, missing); got != want {
		t.Errorf("RenderRecall:\n%s\nwant\n%s", got, want)
	}
	if got := RenderRecall(nil, failures, missing); got != "⚠ ghi789 — recall unavailable — block for #ghi789 was not found in the session file\n✗ {#zzzzzz FOLDED} — no folded block with that code" {
		t.Errorf("no match: %s", got)
	}
	if got := RenderRecall(nil, nil, nil); got != NoCodes {
		t.Errorf("nothing: %s", got)
	}
	if NoCodesRecall != "No codes provided (pass codes, or search=<term> to sweep all folded blocks)." {
		t.Error(NoCodesRecall)
	}
}

func TestRenderUnfold(t *testing.T) {
	for _, tc := range []struct {
		u    Unfold
		want string
	}{
		{Unfold{
			Expanded:  []Match{{Code: "abc123", Label: "tool_result bash · turn 3", Text: "ignored"}, {Code: "bcd234", Label: "thinking · turn 1"}},
			Already:   []string{"def456"},
			Missing:   []string{"#nope"},
			Compacted: []string{"{#ghi789 FOLDED}"},
		}, `✓ abc123 — tool_result bash · turn 3
✓ bcd234 — thinking · turn 1
• def456 — already unfolded; its full content is in your context
✗ #nope — no folded block with that code
⚠ {#ghi789 FOLDED} — compacted out of live history; nothing to re-expand. Use recall_folded code=ghi789 (with grep=<term> or lines=<a-b>) to read it.

Expanded 2 blocks; their full content returns on your next turn.`},
		{Unfold{Already: []string{"def456"}}, "• def456 — already unfolded; its full content is in your context"},
		{Unfold{Compacted: []string{"ghi789"}}, "⚠ ghi789 — compacted out of live history; nothing to re-expand. Use recall_folded code=ghi789 (with grep=<term> or lines=<a-b>) to read it."},
		{Unfold{Missing: []string{"x"}}, "✗ x — no folded block with that code"},
		{Unfold{}, "No codes provided."},
	} {
		if got := RenderUnfold(tc.u); got != tc.want {
			t.Errorf("RenderUnfold:\n%s\nwant\n%s", got, tc.want)
		}
	}
}

// TestFinderOffsets pins the UTF-16 offsets the grep window centres on.
func TestFinderOffsets(t *testing.T) {
	for _, tc := range []struct {
		line, term string
		want       int
	}{
		{"abc", "B", 1},
		{"abc", "", 0},
		{"abc", "x", -1},
		{emoji + "Key", "key", 2},
		{"é" + emoji + "Ω", "ω", 3},
		{"\xed\xa0\x80x", "X", 1}, // a lone surrogate is one unit
		{"\xffA", "a", 1},         // an invalid byte is one unit
		{"ȺA", "ⱥa", 0},           // lower case longer in UTF-8, same in UTF-16
	} {
		if got := newFinder(tc.term).index(tc.line); got != tc.want {
			t.Errorf("index(%q, %q) = %d, want %d", tc.line, tc.term, got, tc.want)
		}
	}
	if n := tokens.Units("ȺA"); n != 2 {
		t.Fatal(n)
	}
}

// TestLineCountsAgreeWithTheDigest: the "N lines" a digest shows is the
// count every recall read numbers and reports, so lines=N-N reads the
// block's last line and lines=N+1-N+1 is past the end: with and without a
// final newline, with CRLF, blank lines and the empty text. (A digest said
// 321 lines for a block recall said had 322.)
func TestLineCountsAgreeWithTheDigest(t *testing.T) {
	count := regexp.MustCompile(` → (\d+) lines?, `)
	long := strings.Repeat("output line of a long result\n", 400)
	for _, text := range []string{
		"one", "one\n", "one\ntwo", "one\ntwo\n", "one\r\ntwo\r\n", "one\r\ntwo",
		"one\n\nthree\n", "one\n\n", "\n\none", "  \none\n", "", "\n", long, long + "tail",
	} {
		n := digest.LineCount(text)
		lines := digest.SplitLines(text)
		if len(lines) != n {
			t.Errorf("%.40q: SplitLines has %d lines, LineCount %d", text, len(lines), n)
			continue
		}
		dig := digest.ToolResult("r:x", "bash", text, false, 10, digest.DefaultLimits)
		if m := count.FindStringSubmatch(dig); m != nil {
			if m[1] != strconv.Itoa(n) {
				t.Errorf("%.40q: digest says %s lines, LineCount %d", text, m[1], n)
			}
		} else if !tokens.IsBlank(text) || !strings.Contains(dig, "→ empty") {
			t.Errorf("%.40q: digest %q", text, dig)
		}
		if n > 0 {
			last := strconv.Itoa(n)
			if out, note := Lines(text, last+"-"+last, SourceLedger); out != last+": "+lines[n-1] || note != "lines "+last+"-"+last+" of "+last+"" {
				t.Errorf("%.40q: lines=%s-%s: %q %q", text, last, last, out, note)
			}
		}
		past := strconv.Itoa(n + 1)
		if out, note := Lines(text, past+"-"+past, SourceLedger); out != "" || note != "empty range "+past+"-"+strconv.Itoa(n)+" (session file has "+strconv.Itoa(n)+" "+plural(n, "line", "lines")+")" {
			t.Errorf("%.40q: lines=%s-%s: %q %q", text, past, past, out, note)
		}
		if _, note := Grep(text, "zzz-absent", SourceLedger); !strings.HasSuffix(note, ", "+strconv.Itoa(n)+" "+plural(n, "line", "lines")+")") {
			t.Errorf("%.40q: grep note %q, want %d lines", text, note, n)
		}
		if _, note := Whole(text); note != "" && !strings.Contains(note, " of "+strconv.Itoa(n)+" ") {
			t.Errorf("%.40q: whole note %q, want of %d", text, note, n)
		}
	}
}

func TestChars(t *testing.T) {
	const lone = "\xed\xa0\x80" // a lone high surrogate kept as WTF-8: one unit, three bytes
	alpha := "abcdefghij"
	pairs := "ab" + emoji + "cd" + emoji // units: a1 b2 😀3-4 c5 d6 😀7-8
	long := rep("x", 20000)
	for _, tc := range []struct {
		name, text, spec, want, note string
	}{
		{"ascii", alpha, "3-5", "cde", "chars 3-5 of 10 — next: chars=6-10"},
		{"whole text", alpha, "1-10", alpha, "chars 1-10 of 10"},
		{"spaces as lines= takes them", alpha, " 9 - 12 ", "ij", "chars 9-10 of 10"},
		{"start raised to 1", alpha, "0-2", "ab", "chars 1-2 of 10 — next: chars=3-10"},
		{"newlines are units, served as they are", "a\r\nb\n", "2-5", "\r\nb\n", "chars 2-5 of 5"},
		{"past the end", alpha, "11-20", "", "empty range 11-10 (session file has 10 chars)"},
		{"empty text", "", "1-1", "", "empty range 1-0 (session file has 0 chars)"},
		{"zero range", alpha, "0-0", "", "empty range 1-0 (session file has 10 chars)"},
		{"astral whole", pairs, "3-4", emoji, "chars 3-4 of 8 — next: chars=5-8"},
		{"start inside a pair moves back", pairs, "4-6", emoji + "cd", "chars 3-6 of 8 (4-6 requested, a surrogate pair is never split) — next: chars=7-8"},
		{"end inside a pair leaves it out", pairs, "1-3", "ab", "chars 1-2 of 8 (1-3 requested, a surrogate pair is never split) — next: chars=3-8"},
		{"half a pair alone takes the pair", pairs, "7-7", emoji, "chars 7-8 of 8 (7-7 requested, a surrogate pair is never split)"},
		{"second half alone takes the pair", pairs, "8-8", emoji, "chars 7-8 of 8 (8-8 requested, a surrogate pair is never split)"},
		{"lone surrogates are one unit each", "a" + lone + "b" + lone, "2-4", lone + "b" + lone, "chars 2-4 of 4"},
		{"a lone surrogate alone", "a" + lone + "b", "2-2", lone, "chars 2-2 of 3 — next: chars=3-3"},
		{"a byte that is not UTF-8 is one unit", "a\xffb", "2-2", "\xff", "chars 2-2 of 3 — next: chars=3-3"},
		{"capped", long, "1-20000", rep("x", 7200), "chars 1-7200 of 20000 (1-20000 requested, 7200-char page cap) — next: chars=7201-14400"},
		{"capped near the end", long, "14401-99999", rep("x", 5600), "chars 14401-20000 of 20000"},
		{"capped, what is left of the request", long, "101-7400", rep("x", 7200), "chars 101-7300 of 20000 (101-7400 requested, 7200-char page cap) — next: chars=7301-7400"},
		{"capped at a pair", "x" + rep(emoji, 4000), "1-8001", "x" + rep(emoji, 3599), "chars 1-7199 of 8001 (1-8001 requested, 7200-char page cap, a surrogate pair is never split) — next: chars=7200-8001"},
		{"capped after the start moved back", rep(emoji, 4000), "2-8000", rep(emoji, 3600), "chars 1-7200 of 8000 (2-8000 requested, 7200-char page cap, a surrogate pair is never split) — next: chars=7201-8000"},
		{"absurd bounds", alpha, "1-99999999999999999999999", alpha, "chars 1-10 of 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := Chars(tc.text, tc.spec, SourceLedger)
			if got != tc.want || note != tc.note {
				t.Errorf("Chars(%.30q, %q):\n got %.80q\nnote %q\nwant %.80q\nnote %q", tc.text, tc.spec, got, note, tc.want, tc.note)
			}
		})
	}
	// The CLI's notes name its flag.
	if _, note := Slice(long, Options{Chars: "1-20000", Spelling: CLIFlags}, SourceLedger); !strings.HasSuffix(note, " — next: -chars 7201-14400") {
		t.Errorf("CLI spelling: %q", note)
	}
	// Malformed: refused whole, as lines= is.
	for _, spec := range []string{"", "abc", "3", "3-", "-3", "1-2-3", "1–3", "1.5-2", "+1-2", "1 2", "1-2x", "3-2"} {
		got, note := Chars(alpha, spec, SourceLedger)
		want := `malformed chars="` + spec + `": want "start-end", two character positions with start ≤ end, e.g. chars=1-7200 — nothing returned`
		if got != "" || note != want || ValidChars(spec) {
			t.Errorf("Chars(%q) = %q, %q (valid %v)", spec, got, note, ValidChars(spec))
		}
	}
	if CharsPageCap != 7200 || tokens.EstimateUnits(CharsPageCap) > WholeTokenCap-200 {
		t.Errorf("CharsPageCap %d", CharsPageCap)
	}
}

// TestHintsNameWhatTheReaderTypes: every option a note or mark suggests is
// spelled as its reader passes it: the tool's argument (chars=a-b) or the
// CLI's flag (-chars a-b).
func TestHintsNameWhatTheReaderTypes(t *testing.T) {
	long := "a\n" + rep("x", 40000) + "\nc"
	many := joinLines(200, func(int) string { return "error " + rep("x", 60) })
	for _, tc := range []struct {
		text string
		o    Options
		want []string
	}{
		{long, Options{}, []string{"…[line clipped: 40000 chars, chars 3-40002 — read on with -chars 7203-14402]",
			"LONG LINE CLIPPED: line 2 is chars 3-40002; read it with -chars 3-7202, then on, or -grep <term> inside it"}},
		{joinLines(100, func(int) string { return rep("x", 100) }), Options{}, []string{"— use -lines <a-b> or -grep <term> for the rest"}},
		{long, Options{Lines: "2-2"}, []string{"— line 2 is chars 3-40002; read it with -chars 3-7202, then on"}},
		{many, Options{Grep: "error"}, []string{"— narrow your query or use -lines <a-b>"}},
		{"x\n" + rep("a", 1000) + "NEEDLE" + rep("b", 1000), Options{Grep: "needle"}, []string{"2: […-chars 843-1162, line chars 841-1160 of 2006…] "}},
		{long, Options{Chars: "1-9000"}, []string{"— next: -chars 7201-9000"}},
	} {
		tc.o.Spelling = CLIFlags
		out, note := Slice(tc.text, tc.o, SourceLedger)
		for _, w := range tc.want {
			if !strings.Contains(out+"\n"+note, w) {
				t.Errorf("%+v: lacks %q:\n%.300q\n%s", tc.o, w, out, note)
			}
		}
		if strings.Contains(note, "=<") || strings.Contains(note, "chars=") {
			t.Errorf("%+v: a tool argument in a CLI note: %s", tc.o, note)
		}
	}
	var many3 []Block
	for _, c := range []string{"b1", "b2", "b3"} {
		many3 = append(many3, Block{Code: c, Text: joinLines(30, func(int) string { return "error " + rep("x", 60) })})
	}
	if _, _, note := Search(many3, "error", CLIFlags); note != "capped at ~1000 tok — narrow the term, or follow up with a recall of {code} with -lines <a-b>" {
		t.Errorf("Search: %s", note)
	}
	hits, _, _ := Search([]Block{{Code: "d", Text: "k\n" + rep("q", 20000) + "needle" + rep("q", 20000)}}, "NEEDLE", CLIFlags)
	if got := hits[0].Lines[0]; !strings.HasPrefix(got, "2: […-chars 19843-20162, line chars 19841-20160 of 40006…] ") {
		t.Errorf("Search window: %.90q", got)
	}
}
