package service

import (
	"encoding/json"
	"sort"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/parallel"
	"github.com/contextfold/contextfold/internal/core/registry"
)

// tsEntry is a record written by the public TypeScript implementation
// (custom type contextfold.fold): {"kind":"fold","entry":{…}},
// {"kind":"layer","layer":{"seq","entries":[{"id","digestText"}]}},
// {"kind":"unfold","ids":[…]}, and the legacy "spool"/"gate" kinds.
type tsEntry struct {
	Kind  string `json:"kind"`
	Entry *struct {
		BlockID        string `json:"blockId"`
		Code           string `json:"code"`
		Tool           string `json:"tool"`
		IsError        bool   `json:"isError"`
		Bytes          int    `json:"bytes"`
		SHA256         string `json:"sha256"`
		FullOutputPath string `json:"fullOutputPath"`
	} `json:"entry"`
	Layer *struct {
		Seq     int `json:"seq"`
		Entries []struct {
			ID         string `json:"id"`
			DigestText string `json:"digestText"`
		} `json:"entries"`
	} `json:"layer"`
}

// decodeEntries turns the data of contextfold.fold custom entries into
// engine entries, in order. Records written by the TypeScript implementation
// are read too: its fold records become recall-only registry records, its
// layers become frozen layers with their exact digest bytes, and a record
// without a sha256 (its legacy spool/gate kinds) recalls unverified and says
// so. Entries neither format understands are skipped and counted.
func decodeEntries(raws []json.RawMessage) ([]engine.Entry, int) {
	var out []engine.Entry
	skipped := 0
	tsRecords := map[string]registry.Record{}
	var tsOrder []string
	tsLayers := map[int][]registry.Record{}
	// Decoding an entry is pure and most of a resume's open: over the
	// cores, then taken in file order.
	decoded := make([]engine.Entry, len(raws))
	ok := make([]bool, len(raws))
	parallel.For(len(raws), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			en, err := engine.DecodeEntry(raws[i])
			decoded[i], ok[i] = en, err == nil && en.V > 0
		}
	})
	for i, raw := range raws {
		if ok[i] {
			out = append(out, decoded[i])
			continue
		}
		var ts tsEntry
		if json.Unmarshal(raw, &ts) != nil {
			skipped++
			continue
		}
		switch {
		case ts.Entry != nil && (ts.Kind == "fold" || ts.Kind == "spool" || ts.Kind == "gate"):
			e := ts.Entry
			if e.BlockID == "" || e.Code == "" {
				skipped++
				continue
			}
			if _, ok := tsRecords[e.BlockID]; !ok {
				tsOrder = append(tsOrder, e.BlockID)
			}
			tsRecords[e.BlockID] = registry.Record{ID: e.BlockID, Code: e.Code, Tool: e.Tool, IsError: e.IsError,
				Bytes: e.Bytes, SHA256: e.SHA256, FullOutputPath: e.FullOutputPath, Kind: "tool_result"}
		case ts.Layer != nil && ts.Kind == "layer":
			for _, le := range ts.Layer.Entries {
				tsLayers[ts.Layer.Seq] = append(tsLayers[ts.Layer.Seq], registry.Record{ID: le.ID, Digest: le.DigestText})
			}
		case ts.Kind == "unfold":
			var u struct {
				IDs []string `json:"ids"`
			}
			json.Unmarshal(raw, &u)
			out = append(out, engine.UnfoldEntry(u.IDs))
		default:
			skipped++
		}
	}
	if len(tsRecords) == 0 && len(tsLayers) == 0 {
		return out, skipped
	}
	// Layers carry the frozen bytes; records carry code and sha. Join them.
	seqs := make([]int, 0, len(tsLayers))
	for seq := range tsLayers {
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	inLayer := map[string]bool{}
	var ts []engine.Entry
	for _, seq := range seqs {
		en := engine.Entry{V: engine.EntryVersion, Kind: engine.KindFold, Seq: seq, Trigger: "threshold"}
		for _, l := range tsLayers[seq] {
			rec, ok := tsRecords[l.ID]
			if !ok {
				continue // a layer entry without its fold record cannot be recalled: leave it raw
			}
			rec.Digest = l.Digest
			en.Folds = append(en.Folds, rec)
			inLayer[l.ID] = true
		}
		if len(en.Folds) > 0 {
			ts = append(ts, en)
		}
	}
	var rest []registry.Record
	for _, id := range tsOrder {
		if !inLayer[id] {
			rest = append(rest, tsRecords[id])
		}
	}
	if len(rest) > 0 {
		last := 0
		if len(seqs) > 0 {
			last = seqs[len(seqs)-1]
		}
		ts = append(ts, engine.Entry{V: engine.EntryVersion, Kind: engine.KindFold, Seq: last + 1, Trigger: "compact", Folds: rest})
	}
	return append(ts, out...), skipped
}
