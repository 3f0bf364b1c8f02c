package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/contextfold/contextfold/internal/bench/synth"
	"github.com/contextfold/contextfold/internal/bench/trajectory"
	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// Trace is one trajectory prepared for replay.
type Trace struct {
	Name, Family string
	// Msgs are Pi AgentMessage JSON, system messages excluded.
	Msgs [][]byte
	// Tr is the transcript of every message, for block texts and ids.
	Tr *block.Transcript
	// Tokens[i] is message i's cost as sent raw.
	Tokens []int
	// Requests[k] is the index of the assistant message request k precedes:
	// request k sends Msgs[:Requests[k]].
	Requests []int
	// Output[k] is the token size of that assistant message.
	Output []int
	// System is the fixed system prompt and tool list plus the trajectory's
	// own system text, in tokens.
	System int
	// Errors[i] are the distinct error lines of tool result i (nil otherwise).
	Errors map[int][]string
	// Lines[i] is the line count of message i's text, for placeholders.
	Lines []int
	// ToolResult[i] marks tool-result messages.
	ToolResult []bool
	// Text[i] is what the model reads of message i (messageText).
	Text []string

	refIdx *refIndex
}

// DefaultSystemTokens is the fixed system prompt and tool list: Pi 1.6's own
// default prompt (2,238 characters) and tool declarations (3,202 characters
// of JSON for read, bash, edit, write), measured from a recorded request,
// plus context-fold's two tools.
const DefaultSystemTokens = 1_650

// Load reads and prepares a trajectory file.
func Load(path string, systemTokens int) (*Trace, error) {
	ms, err := trajectory.Load(path)
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	return Prepare(name, trajectory.Family(path), ms, systemTokens), nil
}

// LoadAll reads every trajectory file under paths (directories or files),
// in the order trajectory.Find gives.
func LoadAll(paths []string, systemTokens int) ([]*Trace, error) {
	var traces []*Trace
	for _, p := range paths {
		files, err := trajectory.Find(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			t, err := Load(f, systemTokens)
			if err != nil {
				return nil, err
			}
			traces = append(traces, t)
		}
	}
	if len(traces) == 0 {
		return nil, fmt.Errorf("no trajectories in %s", strings.Join(paths, ", "))
	}
	return traces, nil
}

// A Skip is a file found inside a directory Gather was given that is not a
// session it can replay: why (one of the Skip* reasons) and, for a file
// that failed to read, the error.
type Skip struct {
	Path, Why string
	Err       error
}

// The reasons Gather skips a file.
const (
	SkipOwn       = "of context-fold's own (its seed index)"
	SkipFormat    = "in no session format bench reads"
	SkipMalformed = "malformed"
	SkipNoRequest = "with no model request"
)

// Gather reads every trajectory under paths as LoadAll does, except that a
// file found inside a directory that is not a session it can replay is
// skipped, with why, instead of stopping the run: the folder Pi writes its
// sessions to (one folder per working directory) also holds context-fold's
// own files (context-fold/<session>/seed-index.jsonl), and may hold others.
// A file named in paths itself must load. It fails when nothing is left.
func Gather(paths []string, systemTokens int) ([]*Trace, []Skip, error) {
	var traces []*Trace
	var skipped []Skip
	for _, p := range paths {
		files, err := trajectory.Find(p)
		if err != nil {
			return nil, nil, err
		}
		named := len(files) == 1 && files[0] == p
		for _, f := range files {
			if !named && ownFile(p, f) {
				skipped = append(skipped, Skip{Path: f, Why: SkipOwn})
				continue
			}
			t, why, err := gather(f, systemTokens)
			switch {
			case err != nil && named:
				return nil, nil, err
			case err != nil:
				skipped = append(skipped, Skip{Path: f, Why: why, Err: err})
			case len(t.Requests) == 0 && !named:
				skipped = append(skipped, Skip{Path: f, Why: SkipNoRequest})
			default:
				traces = append(traces, t)
			}
		}
	}
	if len(traces) == 0 {
		return nil, skipped, fmt.Errorf("no trajectories in %s", strings.Join(paths, ", "))
	}
	return traces, skipped, nil
}

// ownFile reports whether f, found under root, is one of context-fold's own
// files: in a context-fold folder below root, or a seed index.
func ownFile(root, f string) bool {
	rel, err := filepath.Rel(root, f)
	if err != nil {
		return false
	}
	dirs := strings.Split(filepath.ToSlash(filepath.Dir(rel)), "/")
	return slices.Contains(dirs, "context-fold") || filepath.Base(f) == "seed-index.jsonl"
}

// gather loads one file; on failure why says which of the Skip reasons.
func gather(path string, systemTokens int) (*Trace, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, SkipMalformed, err
	}
	ms, format, err := trajectory.Parse(data)
	if err != nil {
		why := SkipMalformed
		if format == "" {
			why = SkipFormat
		}
		return nil, why, fmt.Errorf("%s: %w", path, err)
	}
	name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	return Prepare(name, trajectory.Family(path), ms, systemTokens), "", nil
}

// Synthetic returns n generated long Claude Code-shaped sessions
// (package synth), the same n for every call.
func Synthetic(n, systemTokens int) []*Trace {
	out := make([]*Trace, n)
	for i := range out {
		out[i] = Prepare(fmt.Sprintf("session-%03d", i), synth.Family, synth.Session(SyntheticSeed, i), systemTokens)
	}
	return out
}

// SyntheticSeed seeds the generated sessions.
const SyntheticSeed = 30

// Prepare builds a trace from trajectory messages.
func Prepare(name, family string, ms []trajectory.Message, systemTokens int) *Trace {
	c := trajectory.ToPi(ms)
	t := &Trace{Name: name, Family: family, Msgs: c.Messages, Tr: block.Linearize(c.Messages), Errors: map[int][]string{}}
	t.System = systemTokens + tokens.Estimate(c.System)
	t.Tokens = make([]int, len(t.Msgs))
	t.Lines = make([]int, len(t.Msgs))
	t.ToolResult = make([]bool, len(t.Msgs))
	t.Text = make([]string, len(t.Msgs))
	for i := range t.Msgs {
		t.Text[i] = messageText(t.Tr.MessageBlocks(i), nil)
		for _, b := range t.Tr.MessageBlocks(i) {
			t.Tokens[i] += b.Tokens
			t.Lines[i] += strings.Count(b.Text, "\n") + 1
			if b.Kind == block.ToolResult {
				t.ToolResult[i] = true
				seen := map[string]bool{}
				for _, l := range risk.Lines(b.Text, risk.Error) {
					s := tokens.Trim(l.Text)
					if s != "" && !seen[s] {
						seen[s] = true
						t.Errors[i] = append(t.Errors[i], s)
					}
				}
			}
		}
		if c.Assistant[i] && i > 0 {
			t.Requests = append(t.Requests, i)
			t.Output = append(t.Output, t.Tokens[i])
		}
	}
	return t
}

// String names the trace.
func (t *Trace) String() string { return fmt.Sprintf("%s/%s", t.Family, t.Name) }

// key identifies message i rendered in variant v.
func key(i int, v uint64) uint64 { return uint64(i)<<20 | v&0xFFFFF }

// systemKey is the system prompt's segment key.
const systemKey = 1 << 62
