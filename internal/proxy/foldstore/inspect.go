package foldstore

import (
	"fmt"
	"io"
	"sort"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/recall"
)

// Inspection is what contextfold inspect reports about a conversation
// file.
type Inspection struct {
	File    string `json:"file"`
	API     string `json:"api"`
	Created string `json:"created"`
	// Bad counts lines that could not be read (a torn one among them).
	Bad      int            `json:"badLines"`
	Events   []InspectEvent `json:"foldEvents"`
	Unfolded []string       `json:"unfolded"`
	Codes    []InspectCode  `json:"codes"`
	Calls    int            `json:"recallCalls"`
}

// InspectEvent is one fold event that took effect.
type InspectEvent struct {
	Seq     int    `json:"seq"`
	Trigger string `json:"trigger"`
	Blocks  int    `json:"blocks"`
}

// InspectCode is one folded block and whether recall can serve it.
type InspectCode struct {
	Code     string `json:"code"`
	ID       string `json:"id"`
	Seq      int    `json:"seq"`
	Tool     string `json:"tool,omitempty"`
	Bytes    int    `json:"bytes"`
	Recall   string `json:"recall"` // "verified", "sha mismatch", "missing"
	Unfolded bool   `json:"unfolded"`
}

// Inspect reports what the conversation file at path, holding c, folded,
// and checks every code's text against its sha256 as recall does.
func Inspect(path string, c *Contents) *Inspection {
	in := &Inspection{File: path, API: c.API, Created: c.Created, Bad: c.Bad, Calls: len(c.Calls), Unfolded: []string{}, Codes: []InspectCode{}, Events: []InspectEvent{}}
	void := map[int]bool{}
	for _, en := range c.Entries {
		if en.Kind == engine.KindVoid {
			void[en.Seq] = true
		}
	}
	for _, en := range c.Entries {
		if en.Kind == engine.KindFold && !void[en.Seq] {
			in.Events = append(in.Events, InspectEvent{Seq: en.Seq, Trigger: en.Trigger, Blocks: len(en.Folds)})
		}
	}
	released := c.Unfolded()
	for _, rec := range c.Records() {
		ic := InspectCode{Code: rec.Code, ID: rec.ID, Seq: rec.Seq, Tool: rec.Tool, Bytes: rec.Bytes, Unfolded: released[rec.ID], Recall: "verified"}
		switch t, ok := c.Texts[rec.ID]; {
		case !ok:
			ic.Recall = "missing"
		case !t.Verified(&rec):
			ic.Recall = "sha mismatch"
		}
		in.Codes = append(in.Codes, ic)
		if ic.Unfolded {
			in.Unfolded = append(in.Unfolded, rec.Code)
		}
	}
	sort.Slice(in.Codes, func(i, j int) bool {
		if in.Codes[i].Seq != in.Codes[j].Seq {
			return in.Codes[i].Seq < in.Codes[j].Seq
		}
		return in.Codes[i].ID < in.Codes[j].ID
	})
	sort.Strings(in.Unfolded)
	return in
}

// WriteInspection prints an inspection for people.
func WriteInspection(w io.Writer, in *Inspection) {
	fmt.Fprintf(w, "proxy conversation (%s), created %s\nfile %s\n", in.API, in.Created, in.File)
	if in.Bad > 0 {
		fmt.Fprintf(w, "%d lines could not be read (torn by a failed write, or not a record)\n", in.Bad)
	}
	fmt.Fprintf(w, "\n%s, %s, %s of recall_folded or unfold noted\n",
		recall.Count(len(in.Events), "fold event", "fold events"), recall.Count(len(in.Codes), "code", "codes"), recall.Count(in.Calls, "call", "calls"))
	for _, e := range in.Events {
		fmt.Fprintf(w, "  layer %d (%s): %s\n", e.Seq, e.Trigger, recall.Count(e.Blocks, "block", "blocks"))
	}
	fmt.Fprintf(w, "\ncodes (recall availability):\n")
	for _, c := range in.Codes {
		state := "folded"
		if c.Unfolded {
			state = "unfolded"
		}
		fmt.Fprintf(w, "  %s  %-8s layer %-3d %-9s %7d bytes  %s  %s\n", digest.Tag(c.Code), c.Tool, c.Seq, state, c.Bytes, c.Recall, c.ID)
	}
}
