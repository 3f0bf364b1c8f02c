package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/contextfold/contextfold/internal/core/compact"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/tokens"
	"github.com/contextfold/contextfold/internal/pi/ledger"
)

// Offline opens a Pi session file for the command-line tools: the same fold
// state the extension rebuilds at session start (its contextfold.fold
// entries replayed), the same recall route, the same handoff seed. The
// session's live context is its active branch as the file records it.
func Offline(path string) (*Service, error) {
	led, err := ledger.ReadFile(path)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(path)
	s := New(nil, nil)
	h := led.Header()
	var raws []json.RawMessage
	for _, e := range led.Custom(CustomType) {
		raws = append(raws, e.Data)
	}
	dir := filepath.Dir(abs)
	if _, err := s.open(OpenParams{SessionID: h.ID, SessionFile: abs, SessionDir: dir, Entries: raws}); err != nil {
		return nil, err
	}
	s.s.led = led
	// The live context: the active branch's messages, as they are kept after
	// the latest compaction on it.
	s.s.eng.Sync(0, branchContext(led, ""))
	return s, nil
}

// branchContext returns the messages of the active branch that Pi would
// send: after the latest compaction, from its first kept entry on.
func branchContext(led *ledger.Ledger, leaf string) [][]byte {
	branch := led.Branch(leaf)
	start := 0
	firstKept := ""
	for i, e := range branch {
		if e.Type == "compaction" {
			start, firstKept = i+1, e.FirstKeptEntryID
		}
	}
	if firstKept != "" {
		for i, e := range branch {
			if e.ID == firstKept {
				start = i
				break
			}
		}
	}
	var out [][]byte
	for _, e := range branch[start:] {
		if e.Type == "message" && e.Message != nil {
			out = append(out, e.Message)
		}
	}
	return out
}

// Inspection is what contextfold inspect reports about a session file.
type Inspection struct {
	File        string          `json:"file"`
	Session     string          `json:"session"`
	Entries     int             `json:"entries"`
	Skipped     int             `json:"skippedLines"`
	Truncated   bool            `json:"truncatedLastLine"`
	Messages    int             `json:"messages"`
	Events      []InspectEvent  `json:"foldEvents"`
	Unfolded    []string        `json:"unfolded"`
	Compactions []InspectCompat `json:"compactions"`
	Codes       []InspectCode   `json:"codes"`
	Masked      int             `json:"tokensMasked"`
	IndexPath   string          `json:"seedIndex,omitempty"`
	IndexCount  int             `json:"seedIndexRecords"`
}

// InspectEvent is one fold event.
type InspectEvent struct {
	Seq     int    `json:"seq"`
	Trigger string `json:"trigger"`
	Blocks  int    `json:"blocks"`
	Masked  int    `json:"tokensMasked"`
}

// InspectCompat is one compaction entry.
type InspectCompat struct {
	ID               string `json:"id"`
	FirstKeptEntryID string `json:"firstKeptEntryId"`
	Deterministic    bool   `json:"deterministic"`
	SummaryChars     int    `json:"summaryChars"`
}

// InspectCode is one folded block and whether recall can serve it.
type InspectCode struct {
	Code   string `json:"code"`
	ID     string `json:"id"`
	Seq    int    `json:"seq"`
	Tool   string `json:"tool,omitempty"`
	Bytes  int    `json:"bytes"`
	Recall string `json:"recall"` // "verified", "unverified (legacy)", "sha mismatch", "missing"
	// Folded: a fold event replaced the block with a digest (false: it was
	// recorded when a compaction removed it).
	Folded bool `json:"frozen"`
	// Unfolded: the agent unfolded it since; its full content is back in
	// context, so it masks nothing.
	Unfolded bool `json:"unfolded"`
}

// Inspect reports the session's fold state and checks every code's recall.
func (s *Service) Inspect() *Inspection {
	ss := s.s
	led := ss.led
	in := &Inspection{File: ss.file, Session: ss.id, Entries: led.Len(), Skipped: led.Skipped(), Truncated: led.Truncated(),
		Messages: len(led.Messages()), IndexPath: ss.index.Path(), Unfolded: []string{}, Events: []InspectEvent{}, Compactions: []InspectCompat{}, Codes: []InspectCode{}}
	if rs, err := ss.index.Records(); err == nil {
		in.IndexCount = len(rs)
	}
	bySeq := map[int]*InspectEvent{}
	for _, rec := range ss.eng.Registry().All() {
		c := InspectCode{Code: rec.Code, ID: rec.ID, Seq: rec.Seq, Tool: rec.Tool, Bytes: rec.Bytes, Folded: rec.Digest != "", Unfolded: ss.eng.Unfolded(rec.ID)}
		f, err := led.Locate(rec.ID, rec.SHA256)
		switch {
		case err == nil && rec.SHA256 == "":
			c.Recall = "unverified (legacy record)"
		case err == nil:
			c.Recall = "verified"
		case isMismatch(err):
			c.Recall = "sha mismatch"
		default:
			c.Recall = "missing"
		}
		ev := bySeq[rec.Seq]
		if ev == nil {
			ev = &InspectEvent{Seq: rec.Seq, Trigger: "threshold"}
			if rec.Digest == "" {
				ev.Trigger = "compact"
			}
			bySeq[rec.Seq] = ev
		}
		ev.Blocks++
		if err == nil && rec.Digest != "" && !c.Unfolded {
			saved := tokens.Block(f.Text) - tokens.Block(rec.Digest)
			ev.Masked += saved
			in.Masked += saved
		}
		if c.Unfolded {
			in.Unfolded = append(in.Unfolded, rec.Code)
		}
		in.Codes = append(in.Codes, c)
	}
	for _, l := range ss.eng.Layers() {
		if ev := bySeq[l.Seq]; ev != nil {
			ev.Trigger = string(l.Trigger)
		}
	}
	for seq := 1; seq <= ss.eng.LastSeq(); seq++ {
		if ev := bySeq[seq]; ev != nil {
			in.Events = append(in.Events, *ev)
		}
	}
	for _, e := range led.Entries() {
		if e.Type != "compaction" {
			continue
		}
		c := InspectCompat{ID: e.ID, FirstKeptEntryID: e.FirstKeptEntryID, SummaryChars: tokens.Units(e.Summary)}
		c.Deterministic = strings.Contains(e.Summary, compact.Marker)
		in.Compactions = append(in.Compactions, c)
	}
	return in
}

// Recall serves recall_folded's arguments offline.
func (s *Service) Recall(p RecallParams) (*ToolResult, error) { return s.recall(p) }

// Answer answers a recall offline, as the tool does.
func (s *Service) Answer(r recall.Request) (recall.Reply, error) { return s.answer(r, "") }

// Stores returns the stores an offline recall reads, in the order Answer
// reads them: the session's own, then its parent's.
func (s *Service) Stores() ([]recall.Store, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	return s.storesFor(ss, nil), nil
}

// Handoff renders (and writes) the handoff seed offline.
func (s *Service) Handoff(goal string) (*HandoffResult, error) {
	return s.handoff(HandoffParams{Goal: goal})
}

// WriteInspection prints an inspection for people.
func WriteInspection(w io.Writer, in *Inspection) {
	fmt.Fprintf(w, "session %s\nfile %s\n%d entries (%d malformed lines skipped%s), %d messages\n", in.Session, in.File, in.Entries, in.Skipped, truncNote(in.Truncated), in.Messages)
	fmt.Fprintf(w, "\n%s, %s, ~%d tokens masked\n", recall.Count(len(in.Events), "fold event", "fold events"), recall.Count(len(in.Codes), "code", "codes"), in.Masked)
	for _, e := range in.Events {
		fmt.Fprintf(w, "  layer %d (%s): %s, ~%d tokens masked\n", e.Seq, e.Trigger, recall.Count(e.Blocks, "block", "blocks"), e.Masked)
	}
	fmt.Fprintf(w, "\n%d compactions\n", len(in.Compactions))
	for _, c := range in.Compactions {
		kind := "Pi's LLM summary"
		if c.Deterministic {
			kind = "context-fold deterministic summary"
		}
		fmt.Fprintf(w, "  %s: %s, %d chars, first kept entry %s\n", c.ID, kind, c.SummaryChars, c.FirstKeptEntryID)
	}
	fmt.Fprintf(w, "\ncodes (recall availability):\n")
	for _, c := range in.Codes {
		state := "folded"
		switch {
		case c.Unfolded:
			state = "unfolded"
		case !c.Folded:
			state = "recorded at compaction"
		}
		fmt.Fprintf(w, "  %s  %-8s layer %-3d %-22s %7d bytes  %s  %s\n", rawCode(c.Code), c.Tool, c.Seq, state, c.Bytes, c.Recall, c.ID)
	}
	if len(in.Unfolded) > 0 {
		fmt.Fprintf(w, "\nunfolded by the agent: %v\n", in.Unfolded)
	}
	if in.IndexPath != "" {
		fmt.Fprintf(w, "\nseed index %s: %d records\n", in.IndexPath, in.IndexCount)
	}
}

func truncNote(t bool) string {
	if t {
		return "; last line truncated"
	}
	return ""
}

func rawCode(c string) string { return "{#" + c + " FOLDED}" }

func isMismatch(err error) bool { return errors.Is(err, ledger.ErrSHAMismatch) }
