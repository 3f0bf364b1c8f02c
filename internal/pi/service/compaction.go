package service

import (
	"encoding/json"
	"fmt"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/compact"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/core/seedindex"
	"github.com/contextfold/contextfold/internal/pi/indexfile"
)

// CompactParams are Pi's session_before_compact preparation.
type CompactParams struct {
	// Messages are messagesToSummarize followed by turnPrefixMessages: both
	// leave live history (docs/EDGES.md #1).
	Messages        []json.RawMessage `json:"messages"`
	FirstKeptID     string            `json:"firstKeptEntryId"`
	PreviousSummary string            `json:"previousSummary,omitempty"`
	Leaf            string            `json:"leaf,omitempty"`
	Entries         string            `json:"entries,omitempty"`
	// Reason is Pi's: "threshold", "overflow" or "manual"; TokensBefore is
	// Pi's estimate of the context that crossed its threshold.
	Reason       string `json:"reason,omitempty"`
	TokensBefore int    `json:"tokensBefore,omitempty"`
}

// CompactResult is the deterministic compaction.
type CompactResult struct {
	Summary string `json:"summary"`
	Seq     int    `json:"seq"`
	// Recorded counts blocks that got a fold record now; Skipped names those
	// that could not (collision or a failed write): not recallable.
	Recorded int      `json:"recorded"`
	Skipped  []string `json:"skipped,omitempty"`
	Warning  string   `json:"warning,omitempty"`
	// Native is set when the configuration leaves compaction to Pi.
	Native bool `json:"native,omitempty"`
	// Cancel asks Pi not to compact: folding makes the room (see
	// engine.FoldInstead); Why says how.
	Cancel bool   `json:"cancel,omitempty"`
	Why    string `json:"why,omitempty"`
}

// CompactDetails is stored in Pi's compaction entry.
type CompactDetails struct {
	ContextFold struct {
		V        int `json:"v"`
		Seq      int `json:"seq"`
		Recorded int `json:"recorded"`
	} `json:"contextFold"`
}

func (s *Service) compact(p CompactParams) (*CompactResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	// A bridged transport pauses the policy: nothing would fold.
	reserve := ss.compaction.Reserve(ss.model)
	if f := ss.eng.Foldable(ss.window, reserve); !ss.tm.Bridged && engine.FoldInstead(p.Reason, p.TokensBefore, f, ss.window, reserve) {
		s.log.Debug("compaction cancelled: folding makes the room", "tokensBefore", p.TokensBefore, "foldable", f)
		return &CompactResult{Cancel: true, Why: fmt.Sprintf("folding saves ~%d of ~%d tokens, under Pi's threshold", f, p.TokensBefore)}, nil
	}
	if ss.conf.Compact == "native" {
		return &CompactResult{Native: true}, nil
	}
	leaving := ss.eng.Linearize(rawsOf(p.Messages))
	seq := ss.eng.LastSeq() + 1
	res := &CompactResult{Seq: seq}

	// Every foldable block leaving live history that never folded gets a
	// code and a fold record now, per block: one that collides is skipped,
	// the rest are recorded (docs/EDGES.md #4, 7).
	var recs []registry.Record
	ev, skipped := ss.eng.Compaction(leaving.Blocks())
	res.Skipped = append(res.Skipped, skipped...)
	if ev != nil {
		recs = ev.Folds
	}
	// The compaction's seed-index record covers the whole leaving span.
	var masked []seedindex.Masked
	lb := leaving.Blocks()
	calls := map[string]*block.Block{}
	var users []*block.Block
	for i := range lb {
		b := &lb[i]
		switch b.Kind {
		case block.ToolCall:
			calls[b.CallID] = b
		case block.User:
			users = append(users, b)
		case block.ToolResult, block.Thinking:
			sp := seedindex.Span{ID: b.ID, Code: ss.eng.Code(b.ID), Tool: b.ToolName, Kind: b.Kind.String(), Turn: b.Turn, SHA256: registry.Sum(b.Text)}
			sp.Bytes, sp.Lines = registry.Extent(b.Text)
			name := b.ToolName
			if c, ok := calls[b.CallID]; ok && name == "" {
				name = c.ToolName
			}
			var facts seedindex.Facts
			if !seedindex.OwnAnswer(name) {
				facts = seedindex.Extract(b.Text)
			}
			masked = append(masked, seedindex.Masked{Block: b, Facts: facts, Span: sp})
		}
	}
	at := s.now().UTC().Format("2006-01-02T15:04:05.000Z07:00")
	idx := seedindex.Build(seedindex.Input{Seq: seq, Trigger: string(policy.Compact), Masked: masked, Calls: calls, Users: users})
	if err := ss.index.Append(indexfile.Record{Record: idx, Session: ss.id, At: at}); err != nil {
		s.log.Warn("compaction: seed-index record not written", "err", err)
	}
	ss.pendingCompact = seq
	ss.eng.EnsureSeqAtLeast(seq)
	if len(recs) > 0 {
		en := engine.Entry{V: engine.EntryVersion, Kind: engine.KindFold, Seq: seq, Trigger: string(policy.Compact), Folds: recs}
		j := &journal{s: s, ss: ss, ctx: s.ctx}
		if err := j.persist(en); err != nil {
			for _, r := range recs {
				res.Skipped = append(res.Skipped, r.ID)
			}
			s.log.Warn("compaction: fold records not written; those blocks are not recallable", "blocks", len(recs), "err", err)
		} else {
			ss.eng.Replay([]engine.Entry{en})
			res.Recorded = len(recs)
		}
	}

	// The summary renders the whole compacted history of the active branch
	// from the session file when there is one, else what leaves now.
	history := leaving.Blocks()
	// The summary is numbered by the session's compactions, this one
	// included; the number keeps two summaries' texts apart.
	nth := max(ss.compactions, ss.summaries) + 1
	if p.PreviousSummary != "" {
		nth = max(nth, 2)
	}
	led, err := s.ledgerFor(ss, []byte(p.Entries))
	if err == nil {
		n := 1
		for _, e := range led.Branch(p.Leaf) {
			if e.Type == "compaction" {
				n++
			}
		}
		nth = max(nth, n)
	}
	ss.summaries = nth
	if err == nil && p.FirstKeptID != "" {
		var msgs [][]byte
		found := false
		for _, e := range led.Branch(p.Leaf) {
			if e.ID == p.FirstKeptID {
				found = true
				break
			}
			if e.Type == "message" && e.Message != nil {
				msgs = append(msgs, e.Message)
			}
		}
		if found && covers(ss.eng, msgs, leaving) {
			history = ss.eng.Linearize(msgs).Blocks()
		}
	}
	all := map[string]string{}
	for _, rec := range ss.eng.Registry().All() {
		all[rec.ID] = rec.Code
	}
	res.Summary = compact.Render(compact.Input{Title: "Compaction summary", Seq: nth, Blocks: history, Codes: all, SessionFile: ss.file, Carried: p.PreviousSummary})
	return res, nil
}

// covers reports whether every durable block leaving now is in msgs, so the
// branch history can stand in for the two arrays Pi handed over.
func covers(e *engine.Engine, msgs [][]byte, leaving *block.Transcript) bool {
	have := map[string]bool{}
	for _, b := range e.Linearize(msgs).Blocks() {
		have[b.ID] = true
	}
	for _, b := range leaving.Blocks() {
		if block.Durable(b.ID) && !have[b.ID] {
			return false
		}
	}
	return true
}

func rawsOf(ms []json.RawMessage) [][]byte {
	out := make([][]byte, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// CompactedParams report how a compaction ended.
type CompactedParams struct {
	OK bool `json:"ok"`
}

// secondCompaction is the warning after a second compaction in one session.
const secondCompaction = "second forced compaction in this session: consider /fold-handoff to continue in a fresh session seeded with this one's index"

// compacted counts a completed compaction (docs/EDGES.md #2: when it completes, not
// when it starts), or retracts the index record of one that failed.
func (s *Service) compacted(p CompactedParams) (*CompactResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	res := &CompactResult{Seq: ss.pendingCompact}
	if !p.OK {
		if ss.pendingCompact > 0 {
			if err := ss.index.Void(ss.pendingCompact, s.now().UTC().Format("2006-01-02T15:04:05.000Z07:00")); err != nil {
				return nil, fmt.Errorf("retract compaction record: %w", err)
			}
		}
		ss.pendingCompact = 0
		return res, nil
	}
	ss.pendingCompact = 0
	ss.compactions++
	if ss.compactions == 2 {
		res.Warning = secondCompaction
	}
	return res, nil
}
