package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/pi/protocol"
)

// foldedSession runs msgs through a service until it folds and writes the
// session file Pi would hold: a message entry per message, the fold
// entries after the message whose request committed them.
func foldedSession(t *testing.T, msgs []json.RawMessage) (file string, ids, entryIDs []string, entries []json.RawMessage) {
	t.Helper()
	c, ad := start(t)
	dir := t.TempDir()
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir}, nil); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"type":"session","version":3,"id":"s1","timestamp":"2026-12-02T00:00:00.000Z","cwd":"/w"}` + "\n")
	parent := "null"
	n := 0
	line := func(body string) string {
		n++
		id := fmt.Sprintf("e%07d", n)
		fmt.Fprintf(&b, `{%s,"id":%q,"parentId":%s,"timestamp":"2026-12-02T00:00:00.000Z"}`+"\n", body, id, parent)
		parent = `"` + id + `"`
		return id
	}
	held := 0
	for i, m := range msgs {
		ids = append(ids, line(`"type":"message","message":`+string(m)))
		if i%2 == 1 {
			continue
		}
		out := turn(t, c, held, msgs[held:i+1], 16000)
		held = out.Len
		for _, en := range ad.entries[len(entries):] {
			entries = append(entries, en)
			entryIDs = append(entryIDs, line(`"type":"custom","customType":"contextfold.fold","data":`+string(en)))
		}
	}
	if len(entries) == 0 {
		t.Fatal("setup: nothing folded")
	}
	file = filepath.Join(dir, "session.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, ids, entryIDs, entries
}

func ptrs(ids []string) []*string {
	out := make([]*string, len(ids))
	for i := range ids {
		out[i] = &ids[i]
	}
	return out
}

// TestOpenAndTurnFromTheSessionFile: an open that names its fold entries by
// id and a turn that names its messages by id read them from the session
// file and answer exactly as when the adapter sends their bytes; a file that
// does not hold them is refused without effect.
func TestOpenAndTurnFromTheSessionFile(t *testing.T) {
	msgs := messages(30, "")
	file, ids, entryIDs, entries := foldedSession(t, msgs)
	dir := filepath.Dir(file)

	resume := func(open OpenParams, tp map[string]any) (OpenResult, TurnResult) {
		t.Helper()
		c, _ := start(t)
		open.SessionID, open.SessionFile, open.SessionDir = "s1", file, dir
		var or OpenResult
		if err := call(t, c, "open", open, &or); err != nil {
			t.Fatal(err)
		}
		var tr TurnResult
		tp["keep"], tp["window"], tp["full"] = 0, 16000, true
		if err := call(t, c, "turn", tp, &tr); err != nil {
			t.Fatal(err)
		}
		return or, tr
	}
	wantOpen, want := resume(OpenParams{Entries: entries}, map[string]any{"append": msgs})
	if want.Placements == nil || len(*want.Placements) == 0 {
		t.Fatal("setup: the resumed request places nothing")
	}

	gotOpen, got := resume(OpenParams{EntryIDs: entryIDs, FileVersion: 3}, map[string]any{"file": ids, "fileVersion": 3, "append": []json.RawMessage{}})
	if !gotOpen.EntriesFromFile {
		t.Fatal("open did not read the entries from the file")
	}
	gotOpen.EntriesFromFile = false
	if !reflect.DeepEqual(gotOpen, wantOpen) {
		t.Errorf("open from the file:\n got %+v\nwant %+v", gotOpen, wantOpen)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("turn from the file:\n got %+v\nwant %+v", got, want)
	}

	// Holes: the first and fifth messages inline, the last three after File.
	holes := ptrs(ids[:len(ids)-3])
	holes[0], holes[4] = nil, nil
	_, got = resume(OpenParams{EntryIDs: entryIDs, FileVersion: 3}, map[string]any{"file": holes, "fileVersion": 3, "append": append([]json.RawMessage{msgs[0], msgs[4]}, msgs[len(msgs)-3:]...)})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("turn with inline messages:\n got %+v\nwant %+v", got, want)
	}

	// Entries the file does not hold as named: nothing replays.
	for _, bad := range []OpenParams{
		{EntryIDs: entryIDs[1:], FileVersion: 3},
		{EntryIDs: append(append([]string{}, entryIDs...), "e9999999"), FileVersion: 3},
		{EntryIDs: entryIDs, FileVersion: 2},
	} {
		c, _ := start(t)
		bad.SessionID, bad.SessionFile, bad.SessionDir = "s1", file, dir
		var or OpenResult
		if err := call(t, c, "open", bad, &or); err != nil {
			t.Fatal(err)
		}
		if or.EntriesFromFile || or.Folds != 0 || len(or.Layers) != 0 {
			t.Errorf("open with %d ids, version %d: replayed %d folds from a file that does not match", len(bad.EntryIDs), bad.FileVersion, or.Folds)
		}
	}

	// Messages the file does not hold: stale_file, and the engine holds
	// nothing from that turn (a full resend follows as usual).
	c, _ := start(t)
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionFile: file, SessionDir: dir, Entries: entries}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []map[string]any{
		{"file": append(append([]string{}, ids...), "e9999999"), "fileVersion": 3},
		{"file": ids, "fileVersion": 4},
		{"file": ids[:1], "fileVersion": 3, "append": []json.RawMessage{}},
	} {
		if tp["append"] == nil {
			tp["append"] = []json.RawMessage{}
		}
		if f := tp["file"].([]string); len(f) == 1 {
			tp["file"] = []any{f[0], nil} // a hole with no inline message
		}
		tp["keep"], tp["window"], tp["full"] = 0, 16000, true
		var pe *protocol.Error
		err := call(t, c, "turn", tp, nil)
		if !errors.As(err, &pe) || (pe.Code != "stale_file" && pe.Code != protocol.CodeBadRequest) {
			t.Errorf("turn %v: err %v, want stale_file or bad_request", tp["fileVersion"], err)
		}
	}
	var tr TurnResult
	if err := call(t, c, "turn", map[string]any{"keep": 0, "full": true, "window": 16000, "append": msgs}, &tr); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tr, want) {
		t.Errorf("full turn after refused ones:\n got %+v\nwant %+v", tr, want)
	}
}

// TestPreloadThenDelta: a preload of the messages the session file holds,
// followed by a turn that sends only the newest message, answers exactly as
// one full turn of them all; the preload itself folds and places nothing.
func TestPreloadThenDelta(t *testing.T) {
	msgs := messages(30, "")
	file, ids, _, entries := foldedSession(t, msgs)
	dir := filepath.Dir(file)
	open := func() *protocol.Conn {
		t.Helper()
		c, _ := start(t)
		if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionFile: file, SessionDir: dir, Entries: entries}, nil); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	var want TurnResult
	if err := call(t, c, "turn", map[string]any{"keep": 0, "full": true, "window": 16000, "append": msgs}, &want); err != nil {
		t.Fatal(err)
	}
	if want.Placements == nil || len(*want.Placements) == 0 {
		t.Fatal("setup: the resumed request places nothing")
	}

	for name, pre := range map[string]map[string]any{
		"by id":     {"file": ids[:len(ids)-1], "fileVersion": 3, "append": []json.RawMessage{}},
		"with hole": {"file": append([]any{nil}, anys(ids[1:len(ids)-1])...), "fileVersion": 3, "append": msgs[:1]},
		"inline":    {"append": msgs[:len(msgs)-1]},
	} {
		c := open()
		pre["keep"] = 0
		var pr PreloadResult
		if err := call(t, c, "preload", pre, &pr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if pr.Len != len(msgs)-1 {
			t.Fatalf("%s: preload holds %d messages, want %d", name, pr.Len, len(msgs)-1)
		}
		var got TurnResult
		if err := call(t, c, "turn", map[string]any{"keep": len(msgs) - 1, "window": 16000, "append": msgs[len(msgs)-1:]}, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: turn after preload:\n got %+v\nwant %+v", name, got, want)
		}
	}

	// Refused: keep ≠ 0, before open, messages the file does not hold.
	var pe *protocol.Error
	if err := call(t, open(), "preload", map[string]any{"keep": 1, "append": msgs}, nil); !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
		t.Errorf("preload keep 1: err %v, want bad_request", err)
	}
	c0, _ := start(t)
	if err := call(t, c0, "preload", map[string]any{"keep": 0, "append": msgs}, nil); err == nil {
		t.Error("preload before open: no error")
	}
	if err := call(t, open(), "preload", map[string]any{"keep": 0, "file": []string{"e9999999"}, "fileVersion": 3, "append": []json.RawMessage{}}, nil); !errors.As(err, &pe) || pe.Code != "stale_file" {
		t.Errorf("preload of an unknown entry: err %v, want stale_file", err)
	}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
