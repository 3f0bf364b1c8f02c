package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/bench/trajectory"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// shipped configures an engine as the hosts do: the shipped schedule,
// every other field at its default.
func shipped() Config { return Config{Policy: schedule.Default} }

// session builds Pi 1.6 messages for tests.
type session struct {
	msgs [][]byte
	ts   int64
	resp int
	api  string // assistant messages' api; "" means openai-completions
}

func newSession() *session { return &session{ts: 1_790_000_000_000} }

func (s *session) tick() string { s.ts += 1000; return strconv.FormatInt(s.ts, 10) }

func (s *session) user(text string) *session {
	s.msgs = append(s.msgs, []byte(`{"role":"user","content":[{"type":"text","text":`+rawjson.QuoteString(text)+`}],"timestamp":`+s.tick()+`}`))
	return s
}

// call appends an assistant message with optional thinking and tool calls.
func (s *session) call(thinking string, ids ...string) *session {
	s.resp++
	var parts []string
	if thinking != "" {
		parts = append(parts, `{"type":"thinking","thinking":`+rawjson.QuoteString(thinking)+`,"thinkingSignature":"sig"}`)
	}
	for _, id := range ids {
		parts = append(parts, `{"type":"toolCall","id":`+rawjson.QuoteString(id)+`,"name":"bash","arguments":{"command":"run `+id+`"}}`)
	}
	api := s.api
	if api == "" {
		api = "openai-completions"
	}
	s.msgs = append(s.msgs, []byte(`{"role":"assistant","content":[`+strings.Join(parts, ",")+`],"api":"`+api+`","provider":"fake","model":"m","usage":{"input":1},"stopReason":"toolUse","timestamp":`+s.tick()+`,"responseId":"resp-`+strconv.Itoa(s.resp)+`"}`))
	return s
}

func (s *session) text(t string) *session {
	s.resp++
	s.msgs = append(s.msgs, []byte(`{"role":"assistant","content":[{"type":"text","text":`+rawjson.QuoteString(t)+`}],"stopReason":"stop","timestamp":`+s.tick()+`,"responseId":"resp-`+strconv.Itoa(s.resp)+`"}`))
	return s
}

func (s *session) result(id, text string, isError bool) *session {
	return s.resultNamed(id, "bash", text, isError)
}

func (s *session) resultNamed(id, tool, text string, isError bool) *session {
	s.msgs = append(s.msgs, []byte(`{"role":"toolResult","toolCallId":`+rawjson.QuoteString(id)+`,"toolName":`+rawjson.QuoteString(tool)+`,"content":[{"type":"text","text":`+rawjson.QuoteString(text)+`}],"details":{"x":1},"isError":`+strconv.FormatBool(isError)+`,"timestamp":`+s.tick()+`}`))
	return s
}

// output returns n lines of filler with an ERROR line buried in the middle.
func output(tag string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i == n/2 {
			fmt.Fprintf(&b, "ERROR: %s failed at step %d\n", tag, i)
			continue
		}
		fmt.Fprintf(&b, "%s line %04d: the quick brown fox jumps over the lazy dog\n", tag, i)
	}
	return b.String()
}

// memJournal records committed events; fail makes the next commit fail.
type memJournal struct {
	events  []*Event
	unfolds [][]string
	fail    error
}

func (j *memJournal) Commit(ev *Event) error {
	if j.fail != nil {
		return j.fail
	}
	j.events = append(j.events, ev)
	return nil
}

func (j *memJournal) Unfold(ids []string) error {
	if j.fail != nil {
		return j.fail
	}
	j.unfolds = append(j.unfolds, ids)
	return nil
}

func (j *memJournal) entries() []Entry {
	var out []Entry
	for _, ev := range j.events {
		out = append(out, ev.Entry())
	}
	for _, u := range j.unfolds {
		out = append(out, UnfoldEntry(u))
	}
	return out
}

var errDisk = errors.New("disk full")

// request renders the outgoing request bytes: the JSON array Pi would send.
func request(raws [][]byte) []byte {
	return append(append([]byte("["), bytes.Join(raws, []byte(","))...), ']')
}

// benchFiles returns the trajectories to replay: the shared benchmark set when
// CONTEXTFOLD_BENCH names it, else the sample bundled in testdata.
func benchFiles(t testing.TB) []string {
	root := os.Getenv("CONTEXTFOLD_BENCH")
	if root == "" {
		_, file, _, _ := runtime.Caller(0)
		root = filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "trajectories")
	} else {
		root = filepath.Join(root, "trajectories")
	}
	files, err := trajectory.Find(root)
	if err != nil || len(files) == 0 {
		t.Fatalf("no trajectories under %s: %v", root, err)
	}
	return files
}

func loadPi(t testing.TB, path string) [][]byte {
	t.Helper()
	ms, err := trajectory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return trajectory.ToPi(ms).Messages
}
