package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/registry"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustParse(t *testing.T, data []byte) *Ledger {
	t.Helper()
	l, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func types(es []Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, e.Type)
	}
	return strings.Join(s, ",")
}

// blockText decodes one message alone and returns the text of block id: the
// independent oracle Locate must agree with.
func blockText(t *testing.T, msg []byte, id string) string {
	t.Helper()
	for _, b := range block.Decode(msg, 0).Blocks {
		if b.ID == id {
			return b.Text
		}
	}
	t.Fatalf("no block %s in %s", id, msg)
	return ""
}

func TestRealFiles(t *testing.T) {
	for _, tc := range []struct {
		file      string
		version   int
		entries   int
		types     string // of the first 10 entries
		skipped   int
		leaf      string
		branch    int
		messages  int
		customs   int // fold-state entries
		firstLine int // line of the first entry
	}{
		{"session-basic.jsonl", 3, 9, "model_change,thinking_level_change,message,message,message,message,custom,message,custom", 0, "8f0c9249", 9, 5, 2, 2},
		{"session-custom-compaction.jsonl", 3, 16, "model_change,thinking_level_change,message,message,message,message,custom,message,custom,compaction", 0, "26a90130", 16, 9, 4, 2},
		{"session-truncated-bash-and-context-edit.jsonl", 3, 10, "model_change,thinking_level_change,message,message,message,message,custom,context_edit,message,custom", 0, "f0780ef9", 10, 5, 2, 2},
		{"pi-mono-session.jsonl", 0, 463, "message,message,message,message,message,message,message,message,message,message", 0, "", 463, 454, 0, 2},
	} {
		t.Run(tc.file, func(t *testing.T) {
			l, err := ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			es := l.Entries()
			if l.Version() != tc.version || len(es) != tc.entries || l.Len() != tc.entries || l.Skipped() != tc.skipped || l.Truncated() {
				t.Fatalf("version %d entries %d skipped %d truncated %v", l.Version(), len(es), l.Skipped(), l.Truncated())
			}
			if got := types(es[:min(10, len(es))]); got != tc.types {
				t.Errorf("types %s\nwant  %s", got, tc.types)
			}
			if h := l.Header(); h.Type != "session" || h.Line != 1 || h.ID == "" || !bytes.HasPrefix(h.Raw, []byte(`{"type":"session"`)) {
				t.Errorf("header %+v", h)
			}
			if l.Leaf() != tc.leaf || len(l.Branch("")) != tc.branch || len(l.Messages()) != tc.messages || len(l.Custom("fold-state")) != tc.customs {
				t.Errorf("leaf %q branch %d messages %d customs %d", l.Leaf(), len(l.Branch("")), len(l.Messages()), len(l.Custom("fold-state")))
			}
			if es[0].Line != tc.firstLine || es[0].Offset != int64(len(l.Header().Raw)+1) {
				t.Errorf("first entry at line %d offset %d", es[0].Line, es[0].Offset)
			}
			data := readTestdata(t, tc.file)
			if l.Offset() != int64(len(data)) {
				t.Errorf("offset %d of %d", l.Offset(), len(data))
			}
			for _, e := range es {
				if !bytes.Equal(data[e.Offset:e.Offset+int64(len(e.Raw))], e.Raw) {
					t.Fatalf("line %d: Raw is not the file's bytes", e.Line)
				}
			}
		})
	}
}

func TestEntryFields(t *testing.T) {
	l := mustParse(t, readTestdata(t, "session-custom-compaction.jsonl"))
	es := l.Entries()
	if e := es[0]; e.ID != "5ae37bb7" || e.ParentID != "" || e.Line != 2 || !strings.HasPrefix(e.Timestamp, "2026-") {
		t.Errorf("model_change %+v", e)
	}
	if e := es[3]; e.Type != "message" || e.ParentID != "45065626" || !bytes.HasPrefix(e.Message, []byte(`{"role":"user"`)) || !bytes.HasSuffix(e.Message, []byte("}")) {
		t.Errorf("user message %q", e.Message)
	}
	c := l.Custom("fold-state")
	if c[0].ID != "e05031b2" || string(c[0].Data) != `{"turnIndex":0,"note":"probe"}` || c[3].Line != 17 {
		t.Errorf("custom %+v", c[0])
	}
	if l.Custom("nope") != nil {
		t.Error("unknown custom type matched")
	}
	comp := es[9]
	if comp.Summary != "CUSTOM SUMMARY FROM FOLD-EXT" || comp.FirstKeptEntryID != "15e40bc0" || string(comp.Details) != `{"foldVersion":1}` {
		t.Errorf("compaction %+v", comp)
	}
	if e, ok := l.Entry("9cdceeaf"); !ok || e.Type != "compaction" {
		t.Errorf("Entry(compaction) = %v", ok)
	}

	ce := mustParse(t, readTestdata(t, "session-truncated-bash-and-context-edit.jsonl")).Entries()[7]
	if ce.TargetID != "4f926027" || string(ce.Replacement) != `{"content":[{"type":"text","text":"[folded by fold-ext: entry 4f926027]"}]}` {
		t.Errorf("context_edit %+v", ce)
	}

	early := mustParse(t, readTestdata(t, "pi-mono-session.jsonl"))
	last := early.Entries()[early.Len()-1]
	if last.Type != "compaction" || !strings.HasPrefix(last.Summary, "# Context Checkpoint") || last.FirstKeptEntryID != "" || last.ID != "" || last.Line != 463 {
		t.Errorf("early compaction %+v", last.Line)
	}
}

func TestBranch(t *testing.T) {
	base := `{"type":"session","version":3,"id":"s"}
{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"one","timestamp":1}}
{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":"two","timestamp":2}}
{"type":"message","id":"c","parentId":"a","message":{"role":"user","content":"fork","timestamp":3}}
{"type":"label","id":"d","parentId":"c","targetId":"a","label":"x"}
{"type":"message","id":"e","parentId":"zz","message":{}}
{"type":"message","id":"f","parentId":"g"}
{"type":"message","id":"g","parentId":"f"}
`
	l := mustParse(t, []byte(base))
	ids := func(es []Entry) string {
		var s []string
		for _, e := range es {
			s = append(s, e.ID)
		}
		return strings.Join(s, ">")
	}
	for _, tc := range []struct{ leaf, want string }{
		{"b", "a>b"},
		{"d", "a>c>d"},
		{"a", "a"},
		{"e", "e"},   // broken link: the path ends where it breaks
		{"", "f>g"},  // the leaf is the last entry; a cycle stops
		{"nope", ""}, // unknown leaf
		{"c", "a>c"}, // a fork
		{"g", "f>g"}, // cycle from the other side
		{"f", "g>f"}, // and back
	} {
		if got := ids(l.Branch(tc.leaf)); got != tc.want {
			t.Errorf("Branch(%q) = %s, want %s", tc.leaf, got, tc.want)
		}
	}

	early := mustParse(t, []byte(`{"type":"session","id":"s"}
{"type":"message","message":{"role":"user","content":"one","timestamp":1}}
{"type":"thinking_level_change","thinkingLevel":"off"}
`))
	if early.Leaf() != "" || types(early.Branch("")) != "message,thinking_level_change" || types(early.Branch("whatever")) != "message,thinking_level_change" {
		t.Errorf("early branch %s", types(early.Branch("")))
	}
}

func TestLocateRealFiles(t *testing.T) {
	basic := mustParse(t, readTestdata(t, "session-basic.jsonl"))
	msg := basic.Entries()[5].Message // the bash tool result
	sha := registry.Sum(blockText(t, msg, "r:call_1"))
	f, err := basic.Locate("r:call_1", sha)
	if err != nil {
		t.Fatal(err)
	}
	want := Found{ID: "r:call_1", Text: "hi\n", SHA256: sha, Verified: true, Kind: block.ToolResult, ToolName: "bash", EntryID: "12c8adee", Line: 7}
	if f != want {
		t.Errorf("Locate = %+v\nwant     %+v", f, want)
	}
	// The assistant's tool call and final text, the user prompt: every
	// durable id is locatable, by content anchor.
	for id, text := range map[string]string{
		"a:chatcmpl-1:p0": `bash {"command":"echo hi"}`,
		"a:chatcmpl-2:p0": `FINAL: the tool printed "hi"`,
		"u:1796207641792": "ORIGINAL-PROMPT: please run echo hi",
	} {
		f, err := basic.Locate(id, registry.Sum(text))
		if err != nil || f.Text != text || !f.Verified {
			t.Errorf("Locate(%s) = %q, %v", id, f.Text, err)
		}
	}

	// The early format: no ids, found all the same. The sha is computed
	// independently (Python's json + hashlib over the joined text parts).
	early := mustParse(t, readTestdata(t, "pi-mono-session.jsonl"))
	f, err = early.Locate("r:toolu_01Eiija7gxqTyYUmbwqxVfUJ", "4160d335dec3a4d434c46cbc33f7c18d32dbdba55bb4e974680b7f01660c96aa")
	if err != nil || !f.Verified || f.ToolName != "read" || f.Line != 4 || f.EntryID != "" || utf8.RuneCountInString(f.Text) != 27108 {
		t.Errorf("early Locate = %+v %v", f.Line, err)
	}
	// Upper-case hex is the same hash.
	if _, err := early.Locate("r:toolu_01LNTYjFVyUpqQBEatYdmAS9", strings.ToUpper("b240cb302d58868ce6b9d408ada950114479ec9461a3b958ec7b68f85c926487")); err != nil {
		t.Error(err)
	}
	// Every tool result in the early file is found by its own text.
	n := 0
	for _, e := range early.Messages() {
		for _, b := range block.Decode(e.Message, 0).Blocks {
			if b.Kind != block.ToolResult {
				continue
			}
			n++
			if f, err := early.Locate(b.ID, registry.Sum(b.Text)); err != nil || f.Line != e.Line {
				t.Fatalf("%s: %v (line %d, want %d)", b.ID, err, f.Line, e.Line)
			}
		}
	}
	if n != 189 {
		t.Errorf("%d tool results", n)
	}
}

func TestLocateErrors(t *testing.T) {
	l := mustParse(t, readTestdata(t, "session-basic.jsonl"))
	for _, tc := range []struct {
		id, sha string
		want    error
	}{
		{"r:call_1", registry.Sum("tampered"), ErrSHAMismatch},
		{"r:call_1", "not-hex", ErrSHAMismatch},
		{"r:nope", registry.Sum("hi\n"), ErrNotFound},
		{"r:nope", "", ErrNotFound},
		{"m3:r", "", ErrNotFound},   // positional ids are never durable
		{"m0:sys", "", ErrNotFound}, // the system message
		{"", "", ErrNotFound},
	} {
		_, err := l.Locate(tc.id, tc.sha)
		if !errors.Is(err, tc.want) {
			t.Errorf("Locate(%q, %q) = %v, want %v", tc.id, tc.sha, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), tc.id) {
			t.Errorf("error %q does not name the id", err)
		}
	}
	// A legacy record (no sha) is served unverified.
	f, err := l.Locate("r:call_1", "")
	if err != nil || f.Verified || f.Text != "hi\n" || f.SHA256 != registry.Sum("hi\n") {
		t.Errorf("legacy Locate = %+v, %v", f, err)
	}
}

func TestLocateContextEdit(t *testing.T) {
	l := mustParse(t, readTestdata(t, "session-truncated-bash-and-context-edit.jsonl"))
	orig := blockText(t, l.Entries()[5].Message, "r:call_1")
	if !strings.HasPrefix(orig, "3001\n3002\n") || !strings.HasSuffix(orig, "[Showing lines 3001-5000 of 5000. Full output: /home/user/e2e/out/fake_fake-model-text-trunc/pi-bash-4d1a16c32a61b361.log]") {
		t.Fatalf("original text %q…", orig[:20])
	}
	const placeholder = "[folded by fold-ext: entry 4f926027]"
	const fullOutput = "/home/user/e2e/out/fake_fake-model-text-trunc/pi-bash-4d1a16c32a61b361.log"

	// The original keeps its handle.
	f, err := l.Locate("r:call_1", registry.Sum(orig))
	if err != nil || f.Text != orig || f.Edited || !f.Verified || f.FullOutputPath != fullOutput || f.EntryID != "4f926027" {
		t.Errorf("original = %+v, %v", f.Edited, err)
	}
	// The replacement's exact bytes are recovered from the edit entry.
	f, err = l.Locate("r:call_1", registry.Sum(placeholder))
	want := Found{ID: "r:call_1", Text: placeholder, SHA256: registry.Sum(placeholder), Verified: true, Kind: block.ToolResult,
		ToolName: "bash", FullOutputPath: fullOutput, EntryID: "4f926027", Line: 7, Edited: true, EditID: "d137fd68", EditLine: 9}
	if err != nil || f != want {
		t.Errorf("edited = %+v, %v\nwant %+v", f, err, want)
	}
	// A legacy record gets the message as written, not the stand-in.
	if f, err := l.Locate("r:call_1", ""); err != nil || f.Edited || f.Text != orig {
		t.Errorf("legacy = edited %v, %v", f.Edited, err)
	}
}

const hdr = `{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}` + "\n"

func TestLocateSynthetic(t *testing.T) {
	data := hdr +
		// a tool result, retried with the same call id and new output
		`{"type":"message","id":"m1","parentId":null,"message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"first"}],"isError":false}}` + "\n" +
		`{"type":"message","id":"m2","parentId":"m1","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"second"}],"isError":true}}` + "\n" +
		// edits: null (omission), string content, an object without content, a target that is not a message, an unknown target
		`{"type":"context_edit","id":"e1","parentId":"m2","targetId":"m1","replacement":null}` + "\n" +
		`{"type":"context_edit","id":"e2","parentId":"e1","targetId":"m2","replacement":{"content":"plain \ud83d\ude00"}}` + "\n" +
		`{"type":"context_edit","id":"e3","parentId":"e2","targetId":"m2","replacement":{"other":1}}` + "\n" +
		`{"type":"context_edit","id":"e4","parentId":"e3","targetId":"e1","replacement":{"content":"x"}}` + "\n" +
		`{"type":"context_edit","id":"e5","parentId":"e4","targetId":"later","replacement":{"content":"x"}}` + "\n" +
		// a message without content, edited: the content is added
		`{"type":"message","id":"m3","parentId":"e5","message":{"role":"toolResult","toolCallId":"c3","toolName":"read"}}` + "\n" +
		`{"type":"context_edit","id":"e6","parentId":"m3","targetId":"m3","replacement":{"content":[{"type":"text","text":"added"}]}}` + "\n" +
		// a lone surrogate survives byte-faithfully into the text and its hash
		`{"type":"message","id":"m4","parentId":"e6","message":{"role":"toolResult","toolCallId":"c4","toolName":"bash","content":[{"type":"text","text":"a\ud800b"}]}}` + "\n" +
		// a message that is not an object, and one that is not JSON-valid inside
		`{"type":"message","id":"m5","parentId":"m4","message":"nope"}` + "\n" +
		`{"type":"message","id":"later","parentId":"m5","message":{"role":"user","content":"late","timestamp":5}}` + "\n"
	l := mustParse(t, []byte(data))
	for _, tc := range []struct {
		id, text string
		edited   bool
		editID   string
		isError  bool
	}{
		{"r:c1", "first", false, "", false},
		{"r:c1", "second", false, "", true},
		{"r:c1", "plain 😀", true, "e2", true},
		{"r:c3", "", false, "", false},
		{"r:c3", "added", true, "e6", false},
		{"r:c4", "a\xed\xa0\x80b", false, "", false},
		{"u:5", "late", false, "", false},
	} {
		f, err := l.Locate(tc.id, registry.Sum(tc.text))
		if err != nil || f.Text != tc.text || f.Edited != tc.edited || f.EditID != tc.editID || f.IsError != tc.isError || !f.Verified {
			t.Errorf("Locate(%s, %q) = %+v, %v", tc.id, tc.text, f, err)
		}
	}
	for _, text := range []string{"x", "plain"} {
		if _, err := l.Locate("r:c1", registry.Sum(text)); !errors.Is(err, ErrSHAMismatch) {
			t.Errorf("%q: %v", text, err)
		}
	}
	// Legacy: the newest message as written.
	if f, _ := l.Locate("r:c1", ""); f.Text != "second" || f.Verified {
		t.Errorf("legacy = %+v", f)
	}
	if f, _ := l.Locate("r:c3", ""); f.Text != "" || f.Edited {
		t.Errorf("legacy c3 = %+v", f)
	}
}

func TestEdited(t *testing.T) {
	for _, tc := range []struct{ msg, repl, want string }{
		{`{"role":"toolResult","content":[1],"details":{}}`, `{"content":"x"}`, `{"role":"toolResult","content":"x","details":{}}`},
		{`{"content" : [ 1 ] , "z":1}`, `{"content":[{"type":"text","text":"é"}]}`, `{"content" : [{"type":"text","text":"é"}] , "z":1}`},
		{`{"content":1,"content":2}`, `{"content":3}`, `{"content":1,"content":3}`}, // the last member is the one JSON.parse keeps
		{`{"role":"user"}`, `{"content":"x"}`, `{"role":"user","content":"x"}`},
		{` { } `, `{"content":"x"}`, `{ "content":"x"}`},
		{`{"content":1}`, `null`, ``},
		{`{"content":1}`, `{"other":1}`, ``},
		{`{"content":1}`, `"x"`, ``},
		{`[1]`, `{"content":1}`, ``},
	} {
		got, ok := edited([]byte(tc.msg), []byte(tc.repl))
		if string(got) != tc.want || ok != (tc.want != "") {
			t.Errorf("edited(%s, %s) = %s, %v; want %s", tc.msg, tc.repl, got, ok, tc.want)
		}
	}
}

func TestTolerance(t *testing.T) {
	msg := `{"type":"message","id":"m1","parentId":null,"message":{"role":"user","content":"hi","timestamp":1}}`
	for _, tc := range []struct {
		name             string
		data             string
		entries, skipped int
		truncated        bool
		offset           int
		lastLine         int
	}{
		{"clean", hdr + msg + "\n", 1, 0, false, len(hdr + msg + "\n"), 2},
		{"blank lines", "\n" + hdr + "\n  \t\r\n" + msg + "\n\n", 1, 0, false, len("\n" + hdr + "\n  \t\r\n" + msg + "\n\n"), 5},
		{"CRLF", strings.TrimSuffix(hdr, "\n") + "\r\n" + msg + "\r\n", 1, 0, false, len(hdr + msg + "\n\n\n"), 2},
		{"malformed", hdr + "{oops\n" + `[1,2]` + "\n" + `"str"` + "\n" + msg + "\n", 1, 3, false, len(hdr + "{oops\n[1,2]\n\"str\"\n" + msg + "\n"), 5},
		{"two entries on one line", hdr + msg + msg + "\n", 2, 0, false, len(hdr + msg + msg + "\n"), 2},
		// A write that failed part way (a full disk), then the next entry.
		{"torn then glued", hdr + msg[:30] + msg + "\n", 1, 1, false, len(hdr + msg[:30] + msg + "\n"), 2},
		{"whole then torn", hdr + msg + msg[:30] + "\n" + msg + "\n", 2, 1, false, len(hdr + msg + msg[:30] + "\n" + msg + "\n"), 3},
		{"truncated final line", hdr + msg + "\n" + msg[:40], 1, 0, true, len(hdr + msg + "\n"), 2},
		{"truncated after malformed", hdr + "{oops\n" + msg[:40], 0, 1, true, len(hdr + "{oops\n"), 0},
		{"unterminated but whole", hdr + msg, 1, 0, false, len(hdr), 2},
		{"unterminated blank", hdr + msg + "\n   ", 1, 0, false, len(hdr + msg + "\n"), 2},
		{"garbage before the header", "not json\n" + `[]` + "\n" + hdr + msg + "\n", 1, 2, false, len("not json\n[]\n" + hdr + msg + "\n"), 4},
		{"header only", hdr, 0, 0, false, len(hdr), 0},
		{"unterminated header", strings.TrimSuffix(hdr, "\n"), 0, 0, false, 0, 0},
		{"entry without type", hdr + `{"id":"x"}` + "\n", 1, 0, false, len(hdr + `{"id":"x"}` + "\n"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustParse(t, []byte(tc.data))
			if l.Len() != tc.entries || l.Skipped() != tc.skipped || l.Truncated() != tc.truncated || l.Offset() != int64(tc.offset) {
				t.Errorf("entries %d skipped %d truncated %v offset %d", l.Len(), l.Skipped(), l.Truncated(), l.Offset())
			}
			if tc.entries > 0 && l.Entries()[tc.entries-1].Line != tc.lastLine {
				t.Errorf("last line %d", l.Entries()[tc.entries-1].Line)
			}
		})
	}
}

func TestNotSession(t *testing.T) {
	traj, err := os.ReadFile("../../../testdata/trajectories/pi/pi-mono__large-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"empty":            "",
		"blank":            "\n\n \n",
		"garbage":          "hello\nworld\n",
		"trajectory":       string(traj),
		"entry first":      `{"type":"message","message":{}}` + "\n" + hdr,
		"no type":          `{"version":3}` + "\n",
		"truncated header": hdr[:30],
		"json array":       `[{"type":"session"}]` + "\n",
	} {
		_, err := Parse([]byte(data))
		if !errors.Is(err, ErrNotSession) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The error message says what was wrong, and ReadFile names the path.
	path := filepath.Join(t.TempDir(), "x.jsonl")
	os.WriteFile(path, []byte("\n"+`{"type":"message"}`+"\n"), 0o600)
	_, err = ReadFile(path)
	if !errors.Is(err, ErrNotSession) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `line 2: first entry has type "message"`) {
		t.Errorf("ReadFile error %q", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.jsonl")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// snapshot renders everything observable about a ledger, to compare two
// ways of reading the same bytes.
func snapshot(l *Ledger) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "hdr %d %q skipped %d truncated %v offset %d leaf %q\n", l.Header().Line, l.Header().Raw, l.Skipped(), l.Truncated(), l.Offset(), l.Leaf())
	for _, e := range l.Entries() {
		fmt.Fprintf(&sb, "%d@%d %s %s %s %q\n", e.Line, e.Offset, e.Type, e.ID, e.ParentID, e.Raw)
	}
	return sb.String()
}

// TestAppendEquivalence: reading a file in two steps, cut anywhere, is the
// same as reading it at once.
func TestAppendEquivalence(t *testing.T) {
	for _, name := range []string{"session-basic.jsonl", "session-truncated-bash-and-context-edit.jsonl"} {
		data := readTestdata(t, name)
		whole := snapshot(mustParse(t, data))
		// Every cut next to a line end, where the edge cases are, and a
		// sample of cuts inside lines.
		cuts := map[int]bool{len(data): true}
		for cut := 0; cut < len(data); cut += 61 {
			cuts[cut] = true
		}
		for i, c := range data {
			if c == '\n' {
				cuts[i], cuts[i+1] = true, true
				cuts[max(0, i-1)] = true
			}
		}
		for cut := range cuts {
			l, err := Parse(data[:cut])
			if err != nil {
				continue // the header is not complete yet
			}
			if err := l.Append(data[l.Offset():]); err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			if got := snapshot(l); got != whole {
				t.Fatalf("cut %d:\n%s\nwant\n%s", cut, got, whole)
			}
			// Locate works after growth, including an id that arrived late.
			if _, err := l.Locate("a:chatcmpl-2:p0", ""); err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
		}
	}
}

func TestAppendExtendsIndex(t *testing.T) {
	data := readTestdata(t, "session-truncated-bash-and-context-edit.jsonl")
	cut := bytes.Index(data, []byte(`{"type":"context_edit"`))
	l := mustParse(t, data[:cut])
	// Index built before the edit arrives…
	if f, err := l.Locate("r:call_1", ""); err != nil || f.Edited {
		t.Fatal(err)
	}
	if _, err := l.Locate("r:call_1", registry.Sum("[folded by fold-ext: entry 4f926027]")); !errors.Is(err, ErrSHAMismatch) {
		t.Fatal(err)
	}
	// …and extended by it.
	if err := l.Append(data[cut:]); err != nil {
		t.Fatal(err)
	}
	if f, err := l.Locate("r:call_1", registry.Sum("[folded by fold-ext: entry 4f926027]")); err != nil || !f.Edited {
		t.Fatal(err)
	}
	// A provisional entry that was indexed and then re-read.
	m := `{"type":"message","id":"zz","parentId":"f0780ef9","message":{"role":"toolResult","toolCallId":"late","content":[{"type":"text","text":"v"}]}}`
	if err := l.Append([]byte(m)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Locate("r:late", registry.Sum("v")); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte(m[:len(m)-1] + `,"x":1}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if l.Len() != 11 || l.Entries()[10].Line != 12 {
		t.Errorf("len %d", l.Len())
	}
	if f, err := l.Locate("r:late", registry.Sum("v")); err != nil || f.Line != 12 {
		t.Fatal(err)
	}
}

func TestAppendHeaderRewritten(t *testing.T) {
	l := mustParse(t, []byte(`{"type":"session"}`))
	if err := l.Append([]byte(`{"type":"session"}x` + "\n" + `{"type":"message"}` + "\n")); !errors.Is(err, ErrNotSession) {
		t.Errorf("Append = %v", err)
	}
}

func TestRefresh(t *testing.T) {
	data := readTestdata(t, "session-custom-compaction.jsonl")
	path := filepath.Join(t.TempDir(), "s.jsonl")
	cut := bytes.Index(data, []byte(`{"type":"compaction"`))
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(data[:cut+25]) // ends mid-line
	l, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 9 || !l.Truncated() || l.Offset() != int64(cut) {
		t.Fatalf("len %d truncated %v offset %d", l.Len(), l.Truncated(), l.Offset())
	}
	if grew, err := l.Refresh(path); grew || err != nil {
		t.Fatalf("unchanged file: %v %v", grew, err)
	}
	write(data)
	if grew, err := l.Refresh(path); !grew || err != nil {
		t.Fatalf("grown file: %v %v", grew, err)
	}
	if got, want := snapshot(l), snapshot(mustParse(t, data)); got != want {
		t.Errorf("after refresh:\n%s\nwant\n%s", got, want)
	}
	if _, err := l.Locate("r:call_3", registry.Sum("hi\n")); err != nil {
		t.Error(err)
	}

	// Pi 1.6 resuming after a crash: the cut-off line is ended with a newline
	// and becomes one skipped line; new entries follow.
	crash := append(append([]byte(nil), data[:cut+25]...), '\n')
	crash = append(crash, data[cut:]...)
	write(crash[:cut+25])
	l, _ = ReadFile(path)
	write(crash)
	if _, err := l.Refresh(path); err != nil {
		t.Fatal(err)
	}
	if l.Skipped() != 1 || l.Truncated() || l.Len() != 16 || l.Entries()[15].Line != 18 {
		t.Errorf("after crash: skipped %d truncated %v len %d", l.Skipped(), l.Truncated(), l.Len())
	}

	// A file that shrank or changed under the offset is not this ledger's.
	write(data[:cut])
	if _, err := l.Refresh(path); !errors.Is(err, ErrRewritten) {
		t.Errorf("shrunk: %v", err)
	}
	l, _ = ReadFile(path)
	alt := append([]byte(nil), data...)
	alt[cut-1] = ' '
	write(alt)
	if _, err := l.Refresh(path); !errors.Is(err, ErrRewritten) {
		t.Errorf("rewritten: %v", err)
	}
	if _, err := l.Refresh(filepath.Join(t.TempDir(), "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("gone: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	data := readTestdata(t, "session-custom-compaction.jsonl")
	cut := bytes.Index(data, []byte(`{"type":"compaction"`))
	l := mustParse(t, data[:cut])
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				l.Locate("r:call_1", registry.Sum("hi\n"))
				for _, e := range l.Entries() {
					_ = e.Raw[0]
				}
				l.Branch("")
				l.Custom("fold-state")
			}
		}()
	}
	l.Append(data[cut:])
	wg.Wait()
	if _, err := l.Locate("r:call_3", registry.Sum("hi\n")); err != nil {
		t.Error(err)
	}
}

func BenchmarkReadAndLocate(b *testing.B) {
	data, err := os.ReadFile("testdata/pi-mono-session.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		l, _ := Parse(data)
		l.Locate("r:toolu_01Eiija7gxqTyYUmbwqxVfUJ", "")
	}
}

// TestErrorTextsAreUserFacing: the texts of every error this package
// returns reach users (the CLI, recall_folded's notes), who know a session
// file, not a "ledger".
func TestErrorTextsAreUserFacing(t *testing.T) {
	dir := t.TempDir()
	l := mustParse(t, readTestdata(t, "session-basic.jsonl"))
	notSession := filepath.Join(dir, "x.jsonl")
	os.WriteFile(notSession, []byte(`{"type":"message"}`+"\n"), 0o600)
	_, errMissing := ReadFile(filepath.Join(dir, "missing.jsonl"))
	_, errNotSession := ReadFile(notSession)
	_, errNotFound := l.Locate("r:nope", "")
	_, errMismatch := l.Locate("r:call_1", registry.Sum("tampered"))
	_, errGone := l.Refresh(filepath.Join(dir, "gone"))
	grown := filepath.Join(dir, "s.jsonl")
	data := readTestdata(t, "session-basic.jsonl")
	os.WriteFile(grown, data, 0o600)
	l2, _ := ReadFile(grown)
	os.WriteFile(grown, data[:len(data)/2], 0o600)
	_, errShrank := l2.Refresh(grown)
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"missing":     {errMissing, "missing.jsonl"},
		"not session": {errNotSession, "not a Pi session file"},
		"not found":   {errNotFound, "block r:nope: not found in the session file"},
		"mismatch":    {errMismatch, "the session file's text failed the fold-time sha256 check"},
		"gone":        {errGone, "gone"},
		"shrank":      {errShrank, "s.jsonl: shrank"},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if msg := tc.err.Error(); strings.Contains(msg, "ledger") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want it to say %q and never \"ledger\"", name, msg, tc.want)
		}
	}
}
