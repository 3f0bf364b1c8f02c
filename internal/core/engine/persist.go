package engine

import (
	"fmt"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/registry"
)

// Entry is one persisted engine decision. A Pi session stores each as the
// data of a custom entry of type "contextfold.fold"; replaying them in order
// rebuilds the engine's fold state exactly.
type Entry struct {
	V    int       `json:"v"`
	Kind EntryKind `json:"kind"`
	// Seq and Trigger identify a fold event (KindFold) or the event a void
	// retracts (KindVoid).
	Seq     int    `json:"seq,omitempty"`
	Trigger string `json:"trigger,omitempty"`
	// Folds are a fold event's records; a record without a digest is
	// recall-only (written at compaction for a block that never folded).
	Folds []registry.Record `json:"folds,omitempty"`
	// Thinking is a fold event's cost to a preserved-thinking model's signed
	// thinking; absent when it had none.
	Thinking *ThinkingCost `json:"thinking,omitempty"`
	// IDs are the blocks an unfold released.
	IDs []string `json:"ids,omitempty"`
}

// EntryKind names what an Entry records.
type EntryKind string

// Entry kinds.
const (
	KindFold   EntryKind = "fold"
	KindUnfold EntryKind = "unfold"
	// KindVoid retracts the event with the same Seq: its records were written
	// but the event did not take effect. Replay skips it (append-only; the
	// earlier line is never edited).
	KindVoid EntryKind = "void"
)

// EntryVersion is the current Entry format.
const EntryVersion = 1

// Entry returns the persisted form of a fold event.
func (ev *Event) Entry() Entry {
	en := Entry{V: EntryVersion, Kind: KindFold, Seq: ev.Seq, Trigger: string(ev.Trigger), Folds: ev.Folds}
	if !ev.Thinking.IsZero() {
		th := ev.Thinking
		en.Thinking = &th
	}
	return en
}

// UnfoldEntry returns the persisted form of an unfold.
func UnfoldEntry(ids []string) Entry {
	return Entry{V: EntryVersion, Kind: KindUnfold, IDs: ids}
}

// VoidEntry returns the entry that retracts event seq.
func VoidEntry(seq int) Entry {
	return Entry{V: EntryVersion, Kind: KindVoid, Seq: seq}
}

// Replay applies persisted entries in order on top of the current state. It
// skips voided events and records whose code collides with an earlier id, and
// reports how many entries it could not use. It never returns a partial
// layer: each event's layer is whole or absent.
func (e *Engine) Replay(entries []Entry) (skipped int, err error) {
	void := map[int]bool{}
	for _, en := range entries {
		if en.Kind == KindVoid {
			void[en.Seq] = true
		}
	}
	var errs []error
	for i, en := range entries {
		switch en.Kind {
		case KindFold:
			if void[en.Seq] || en.Seq <= 0 {
				skipped++
				continue
			}
			if l, ok := e.Layer(en.Seq); ok && len(l.Entries) > 0 {
				skipped++ // the same event persisted twice
				continue
			}
			ev := &Event{Seq: en.Seq, Trigger: policy.Trigger(en.Trigger)}
			if en.Thinking != nil {
				for _, id := range en.Thinking.Lost {
					e.lost[id] = true
				}
			}
			for _, rec := range en.Folds {
				if rec.ID == "" || rec.Code == "" || e.reg.Collides(rec.ID, rec.Code) {
					errs = append(errs, fmt.Errorf("entry %d: record %q unusable", i, rec.ID))
					continue
				}
				rec.Seq = en.Seq
				ev.Folds = append(ev.Folds, rec)
			}
			e.freeze(ev)
		case KindUnfold:
			for _, id := range en.IDs {
				e.unfolded[id] = true
			}
			e.version++
		case KindVoid:
			e.EnsureSeqAtLeast(en.Seq)
		default:
			skipped++
		}
	}
	if len(errs) > 0 {
		return skipped + len(errs), fmt.Errorf("replay: %d records unusable (first: %w)", len(errs), errs[0])
	}
	return skipped, nil
}

// Compaction is the event that records, when the agent compacts its own
// history (blocks, linearized by this engine), every block of it that
// never folded, so that each stays
// recallable byte for byte once the history is gone: a record per block
// (Compacted, with its code), none of them folded in any request sent.
// It is nil when every such block has a record already. The caller
// commits it and replays its entry, as for a fold event; ids whose code
// collides stay out, listed in skipped.
func (e *Engine) Compaction(blocks []block.Block) (ev *Event, skipped []string) {
	seq := e.lastSeq + 1
	ev = &Event{Seq: seq, Trigger: policy.Compact}
	codes := map[string]string{}
	for k := range blocks {
		b := &blocks[k]
		if !block.Durable(b.ID) || !b.Foldable() {
			continue
		}
		if _, ok := e.reg.Get(b.ID); ok {
			continue
		}
		code := e.Code(b.ID)
		if e.reg.Collides(b.ID, code) || (codes[code] != "" && codes[code] != b.ID) {
			skipped = append(skipped, b.ID)
			continue
		}
		codes[code] = b.ID
		bytes, lines := registry.Extent(b.Text)
		ev.Folds = append(ev.Folds, registry.Record{ID: b.ID, Code: code, Seq: seq, Bytes: bytes, Lines: lines, SHA256: registry.Sum(b.Text),
			Tool: b.ToolName, Kind: b.Kind.String(), IsError: b.IsError, Turn: b.Turn, FullOutputPath: b.FullOutputPath, Compacted: true})
	}
	if len(ev.Folds) == 0 {
		return nil, skipped
	}
	return ev, skipped
}
