package foldstore

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/store/jsonl"
	"github.com/contextfold/contextfold/internal/testsupport/testfs"
)

func event(seq int, texts map[string]string) *engine.Event {
	ev := &engine.Event{Seq: seq, Trigger: "budget"}
	for id, t := range texts {
		b, l := registry.Extent(t)
		ev.Folds = append(ev.Folds, registry.Record{ID: id, Code: "c" + id[2:], Seq: seq, Bytes: b, Lines: l, SHA256: registry.Sum(t), Kind: "tool_result", Digest: "{#c" + id[2:] + " FOLDED} digest"})
	}
	return ev
}

func lookup(texts map[string]string) func(string) (string, bool) {
	return func(id string) (string, bool) { t, ok := texts[id]; return t, ok }
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCommitReplay: what a conversation committed reads back after the
// store is closed and opened again: the entries in order, each folded
// text verified against its record.
func TestCommitReplay(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	c, got, err := s.Conversation("openai-responses", "", "thread-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 0 || got.API != "openai-responses" {
		t.Fatalf("new conversation holds %+v", got)
	}
	texts := map[string]string{"r:1": "line 1\nline 2\n", "r:2": "é \u2028 \x00 weird"}
	ev := event(1, texts)
	if err := c.Commit(ev, lookup(texts)); err != nil {
		t.Fatal(err)
	}
	if err := c.Record(engine.UnfoldEntry([]string{"r:1"})); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()

	s = open(t, dir)
	defer s.Close()
	c, got, err = s.Conversation("openai-responses", "", "thread-1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := []engine.Entry{ev.Entry(), engine.UnfoldEntry([]string{"r:1"})}
	if !reflect.DeepEqual(got.Entries, want) {
		t.Fatalf("entries\n%+v\nwant\n%+v", got.Entries, want)
	}
	recs := got.Records()
	for id, text := range texts {
		st, ok := got.Texts[id]
		rec := recs["c"+id[2:]]
		if !ok || st.Text != text || !st.Verified(&rec) {
			t.Errorf("%s: stored %+v, verified %v", id, st, st.Verified(&rec))
		}
	}
	if got.Bad != 0 {
		t.Errorf("%d bad lines", got.Bad)
	}
	// Another key is another file; the key is not in the name.
	c2, got2, err := s.Conversation("openai-responses", "", "thread-2")
	if err != nil || len(got2.Entries) != 0 || c2.Path() == c.Path() || strings.Contains(c2.Path(), "thread") {
		t.Fatalf("second conversation: %v %+v %s", err, got2, c2.Path())
	}
	c2.Close()
}

// TestCommitChecksTexts: a text that does not match its record, or a
// missing one, fails the commit and writes nothing.
func TestCommitChecksTexts(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	c, _, err := s.Conversation("anthropic-messages", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ev := event(1, map[string]string{"r:1": "right"})
	if err := c.Commit(ev, lookup(map[string]string{"r:1": "wrong"})); err == nil {
		t.Error("a mismatching text was committed")
	}
	if err := c.Commit(ev, lookup(nil)); err == nil {
		t.Error("a missing text was committed")
	}
	got, err := ReadFile(c.Path())
	if err != nil || len(got.Entries) != 0 || len(got.Texts) != 0 {
		t.Fatalf("after refused commits: %v %+v", err, got)
	}
}

// TestTornLastLine: a line cut by a crash is skipped, and the next write
// starts on a line of its own.
func TestTornLastLine(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	c, _, _ := s.Conversation("openai-completions", "", "k")
	texts := map[string]string{"r:1": "x"}
	c.Commit(event(1, texts), lookup(texts))
	c.Close()
	f, _ := os.OpenFile(c.Path(), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"t":"entry","entry":{"v":1,"kind":"fo`)
	f.Close()

	c, got, err := s.Conversation("openai-completions", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 1 || got.Bad != 1 {
		t.Fatalf("entries %d bad %d", len(got.Entries), got.Bad)
	}
	texts2 := map[string]string{"r:2": "y"}
	if err := c.Commit(event(2, texts2), lookup(texts2)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	got, err = ReadFile(c.Path())
	if err != nil || len(got.Entries) != 2 || got.Bad != 1 {
		t.Fatalf("after the next commit: %v entries %d bad %d", err, len(got.Entries), got.Bad)
	}
	s.Close()
}

// TestOneWriter: a second writer on the same store is refused until the
// first closes it.
func TestOneWriter(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	s.Close()
	s2 := open(t, dir)
	s2.Close()
}

// TestUnfoldRequests: a reader's request reaches the writer once; a
// request still being written waits for its newline.
func TestUnfoldRequests(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	c, _, _ := s.Conversation("anthropic-messages", "", "k")
	defer c.Close()
	if r, err := c.Requests(); err != nil || r != nil {
		t.Fatalf("no request yet: %v %v", r, err)
	}
	if err := RequestUnfold(c.Path(), []string{"abc123", "def456"}); err != nil {
		t.Fatal(err)
	}
	// The writer's own lines in between are not requests.
	c.Record(engine.UnfoldEntry([]string{"r:9"}))
	f, _ := os.OpenFile(c.Path(), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"t":"unfold-request","codes":["zz`)
	r, err := c.Requests()
	if err != nil || !reflect.DeepEqual(r, [][]string{{"abc123", "def456"}}) {
		t.Fatalf("requests %v %v", r, err)
	}
	f.WriteString(`9999"]}` + "\n")
	f.Close()
	r, _ = c.Requests()
	if !reflect.DeepEqual(r, [][]string{{"zz9999"}}) {
		t.Fatalf("completed request: %v", r)
	}
	if r, _ := c.Requests(); r != nil {
		t.Fatalf("requests again: %v", r)
	}
}

func TestWrongFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()
	c, _, _ := s.Conversation("anthropic-messages", "", "k")
	c.Close()
	if _, _, err := s.Conversation("openai-responses", "", "k"); err != nil {
		t.Fatalf("same key, other api: %v", err) // another file
	}
	os.Rename(c.Path(), filepath.Join(dir, FileName("openai-completions", "k")))
	if _, _, err := s.Conversation("openai-completions", "", "k"); err == nil {
		t.Error("a file of another api was taken")
	}
	bad := filepath.Join(dir, "x.jsonl")
	os.WriteFile(bad, []byte(`{"t":"text"}`+"\n"), 0o600)
	if _, err := ReadFile(bad); err == nil {
		t.Error("a file without its header was read")
	}
	os.WriteFile(bad, []byte(`{"t":"conversation","v":99}`+"\n"), 0o600)
	if _, err := ReadFile(bad); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("a newer format: %v", err)
	}
}

// TestGC: files untouched for longer than the age go; the rest stay.
func TestGC(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()
	old, _, _ := s.Conversation("anthropic-messages", "", "old")
	old.Close()
	fresh, _, _ := s.Conversation("anthropic-messages", "", "fresh")
	fresh.Close()
	past := time.Now().Add(-48 * time.Hour)
	os.Chtimes(old.Path(), past, past)
	removed, err := s.GC(24 * time.Hour)
	if err != nil || !reflect.DeepEqual(removed, []string{old.Path()}) {
		t.Fatalf("removed %v %v", removed, err)
	}
	if files, _ := Files(dir); !reflect.DeepEqual(files, []string{fresh.Path()}) {
		t.Fatalf("left %v", files)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if d, _ := DefaultDir(); d != filepath.Join("/x/state", "contextfold", "proxy") {
		t.Errorf("with XDG_STATE_HOME: %s", d)
	}
	t.Setenv("XDG_STATE_HOME", "relative") // ignored, as the spec says
	if d, _ := DefaultDir(); strings.HasPrefix(d, "relative") {
		t.Errorf("relative XDG_STATE_HOME used: %s", d)
	}
}

// TestFullDisk: on a real full filesystem a fold event's commit fails part
// way and is refused; once space is back, the next events commit, and
// every text of every committed event reads back verified. Before, the
// failed write's torn line swallowed the next event's first text, whose
// digest had been sent.
func TestFullDisk(t *testing.T) {
	fs := testfs.Tmpfs(t, 256<<10)
	s := open(t, fs.Dir)
	defer s.Close()
	c, _, err := s.Conversation("anthropic-messages", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := func(n int, tag string) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("r:%s%d", tag, i)] = strings.Repeat(tag+" output line\n", 300)
		}
		return m
	}
	committed := map[string]string{}
	first := big(1, "a")
	if err := c.Commit(event(1, first), lookup(first)); err != nil {
		t.Fatal(err)
	}
	maps.Copy(committed, first)
	fs.Fill()
	refused := big(4, "b")
	if err := c.Commit(event(2, refused), lookup(refused)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk: %v, want ENOSPC", err)
	}
	if data, _ := os.ReadFile(c.Path()); data[len(data)-1] == '\n' {
		t.Fatal("the failed commit left no torn line: the test does not test it")
	}
	fs.Free()
	for seq, tag := range []string{"c", "d"} {
		texts := big(3, tag)
		if err := c.Commit(event(seq+3, texts), lookup(texts)); err != nil {
			t.Fatal(err)
		}
		maps.Copy(committed, texts)
	}
	got, err := ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	recs := got.Records()
	for id, text := range committed {
		rec := recs["c"+id[2:]]
		st, ok := got.Texts[id]
		if !ok || st.Text != text || !st.Verified(&rec) {
			t.Errorf("%s: stored %v, verified %v", id, ok, st.Verified(&rec))
		}
	}
	for id := range refused {
		if _, ok := recs["c"+id[2:]]; ok {
			t.Errorf("%s: a record of the refused event is in effect", id)
		}
	}
	if len(recs) != len(committed) {
		t.Errorf("%d records in effect, want %d", len(recs), len(committed))
	}
}

// TestFailedCommitVoided: a commit whose lines all landed but whose sync
// failed is voided, now or with the next line written, so it never
// replays.
func TestFailedCommitVoided(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	c, _, _ := s.Conversation("openai-responses", "", "k")
	defer c.Close()
	texts := map[string]string{"r:1": "one"}
	// As if the write had landed and the sync then failed: the lines are
	// there, the event is refused.
	buf := appendLine(nil, Line{T: TText, ID: "r:1", SHA256: registry.Sum("one"), Text: "one"})
	en := event(1, texts).Entry()
	buf = appendLine(buf, Line{T: TEntry, Entry: &en})
	if _, err := jsonl.Append(c.f, buf); err != nil {
		t.Fatal(err)
	}
	c.voids = append(c.voids, 1)
	texts2 := map[string]string{"r:2": "two"}
	if err := c.Commit(event(2, texts2), lookup(texts2)); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	recs := got.Records()
	if _, ok := recs["c1"]; ok || len(recs) != 1 {
		t.Fatalf("records in effect %v: the failed event replays", recs)
	}
}

// TestLoneSurrogates: a text holding lone surrogates (half an emoji, as a
// JavaScript client leaves when it truncates) is stored as the bytes its
// sha256 was taken over, and reads back verified; so does a digest.
func TestLoneSurrogates(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	c, _, _ := s.Conversation("openai-completions", "", "k")
	texts := map[string]string{}
	for i, raw := range []string{`"half \ud83d"`, `"lone \udc00 low"`, `"\ud800"`, `"pair \ud83d\ude00 and \udbff\udfff"`, `"\udc00\ud800 reversed"`} {
		text, err := rawjson.Unquote([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		texts[fmt.Sprintf("r:%d", i)] = text
	}
	ev := event(1, texts)
	ev.Folds[0].Digest = "{#c0 FOLDED} digest of " + texts["r:0"]
	if err := c.Commit(ev, lookup(texts)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()
	got, err := ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	recs := got.Records()
	for id, text := range texts {
		rec := recs["c"+id[2:]]
		st := got.Texts[id]
		if st.Text != text || !st.Verified(&rec) {
			t.Errorf("%s: stored %q, want %q (verified %v)", id, st.Text, text, st.Verified(&rec))
		}
	}
	if !reflect.DeepEqual(got.Entries, []engine.Entry{ev.Entry()}) {
		t.Errorf("entry replays as\n%+v\nwant\n%+v", got.Entries, ev.Entry())
	}
}

// FuzzStore writes fold events into a conversation file, some of them
// torn part way (a failed write, ended by the next append, or glued onto
// by a racing process), then reads the file: every event whose lines all
// landed is in effect with every text verified; no torn one is.
func FuzzStore(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 3, 0}, "out\nput \xed\xa0\xbd")
	f.Add([]byte{1, 1, 1, 0}, `{"t":"text"}`)
	f.Add([]byte{3, 7, 11, 0, 2, 0}, "x")
	f.Fuzz(func(t *testing.T, plan []byte, text string) {
		if len(plan) > 64 {
			return
		}
		s := open(t, t.TempDir())
		defer s.Close()
		c, _, err := s.Conversation("anthropic-messages", "", "k")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		want := map[string]string{}
		notes := 0
		for i, p := range plan {
			seq := i + 1
			texts := map[string]string{fmt.Sprintf("r:%da", seq): text + "a", fmt.Sprintf("r:%db", seq): strings.Repeat(text, int(p%5))}
			switch p % 4 {
			case 0, 1:
				if err := c.Commit(event(seq, texts), lookup(texts)); err != nil {
					t.Fatal(err)
				}
				maps.Copy(want, texts)
				if p%4 == 1 { // a request noted between the events, and its usage
					notes++
					if NoteRequest(c.Path(), Request{N: notes, Raw: len(text), Sent: int(p), Seq: seq}) != nil || NoteUsage(c.Path(), notes, Usage{Input: int(p)}) != nil {
						t.Fatal("noting a request failed")
					}
				}
			case 2, 3: // a write that failed part way: some of its bytes landed
				var buf []byte
				for id, tx := range texts {
					buf = appendLine(buf, Line{T: TText, ID: id, SHA256: registry.Sum(tx), Text: tx})
				}
				en := event(seq, texts).Entry()
				buf = appendLine(buf, Line{T: TEntry, Entry: &en})
				cut := int(p/4) % len(buf) // never the whole: its newline is missing
				if _, err := c.f.Write(buf[:cut]); err != nil {
					t.Fatal(err)
				}
				if p%4 == 3 && cut > 0 && buf[cut-1] != '\n' {
					// Another process's line glued on, as a race would.
					if err := NoteCall(c.Path(), Call{ID: "x", Name: "recall_folded"}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		got, err := ReadFile(c.Path())
		if err != nil {
			t.Fatal(err)
		}
		recs := got.Records()
		for id, tx := range want {
			rec, ok := recs["c"+id[2:]]
			st := got.Texts[id]
			if !ok || st.Text != tx || !st.Verified(&rec) {
				t.Fatalf("%s: record %v, text %q verified %v", id, ok, st.Text, st.Verified(&rec))
			}
		}
		if len(recs) != len(want) {
			t.Fatalf("%d records in effect, want %d", len(recs), len(want))
		}
		// A torn line glued to a request's line may cost that request.
		if len(got.Requests) > notes {
			t.Fatalf("%d requests read, %d noted", len(got.Requests), notes)
		}
		for _, r := range got.Requests {
			if r.Usage == nil || r.Usage.Input != r.Sent {
				t.Fatalf("request %+v read with usage %+v", r, r.Usage)
			}
		}
	})
}

// TestPrivateDir: an existing store directory others can read is made
// private; one another user owns is refused.
func TestPrivateDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows keeps application data private by ACL")
	}
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755) // whatever the umask
	s := open(t, dir)
	s.Close()
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("store directory left %v", st.Mode().Perm())
	}
	if os.Geteuid() != 0 {
		t.Skip("the foreign-owner case needs root to chown")
	}
	other := filepath.Join(t.TempDir(), "theirs")
	os.Mkdir(other, 0o755)
	os.Chmod(other, 0o755)
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Skipf("chown: %v", err)
	}
	if _, err := Open(other); err == nil || !strings.Contains(err.Error(), "owned by another user") {
		t.Fatalf("a readable directory of another user: %v", err)
	}
}

// TestInspectionCounts: one of a thing is said in the singular.
func TestInspectionCounts(t *testing.T) {
	for _, c := range []struct {
		in   Inspection
		want []string
	}{
		{Inspection{Events: []InspectEvent{{Seq: 1, Trigger: "economic", Blocks: 1}}, Codes: []InspectCode{{Code: "abc123"}}, Calls: 1},
			[]string{"1 fold event, 1 code, 1 call of recall_folded", "layer 1 (economic): 1 block\n"}},
		{Inspection{Events: []InspectEvent{{Seq: 1, Blocks: 2}, {Seq: 2, Blocks: 3}}},
			[]string{"2 fold events, 0 codes, 0 calls of recall_folded", "): 2 blocks\n"}},
	} {
		var b strings.Builder
		WriteInspection(&b, &c.in)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("no %q in\n%s", w, b.String())
			}
		}
	}
}

// TestNoteRequests: the requests and usage noted read back by number,
// whatever order their lines landed in; usage for a request never noted
// is left out; neither is taken for an unfold request; a conversation
// opened again sees them.
func TestNoteRequests(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	c, _, err := s.Conversation("anthropic-messages", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	r1 := Request{N: 1, Raw: 1200, Sent: 1200, Window: 200000, Budget: 100000, Reserve: 13000, At: at}
	r2 := Request{N: 2, Raw: 90000, Sent: 40000, Window: 200000, Budget: 100000, Reserve: 13000, Seq: 1, Compactions: 1, At: at.Add(time.Second)}
	u2 := Usage{Input: 3, CacheRead: 30000, CacheWrite: 9997, Output: 512}
	for _, step := range []func() error{
		func() error { return NoteRequest(c.Path(), r2) },
		func() error { return NoteUsage(c.Path(), 2, u2) },
		func() error { return NoteRequest(c.Path(), r1) },
		func() error { return NoteUsage(c.Path(), 7, Usage{Input: 1}) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := c.Requests(); err != nil || r != nil {
		t.Fatalf("request lines taken for unfold requests: %v %v", r, err)
	}
	c.Close()
	_, got, err := s.Conversation("anthropic-messages", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	r2.Usage = &u2
	if want := []Request{r1, r2}; !reflect.DeepEqual(got.Requests, want) {
		t.Fatalf("requests\n%+v\nwant\n%+v", got.Requests, want)
	}
	if got.Bad != 0 {
		t.Fatalf("%d bad lines", got.Bad)
	}
}
