package recall

import (
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/registry"
)

// A Store holds one conversation's folded blocks: their fold records, and
// the originals the blocks are read back from (a Pi session file, the
// proxy's record of a conversation). Answer reads every store alike, so
// every route verifies, slices and labels the same way (docs/EDGES.md #24).
type Store interface {
	// Lookup returns the fold record that holds code.
	Lookup(code string) (registry.Record, bool)
	// Folded returns the records of the blocks folded now (not unfolded),
	// in the order a search sweeps them.
	Folded() []registry.Record
	// Read reads a record's block back (see Original).
	Read(rec registry.Record) Original
	// ReadFile reads a tool's own full-output file (Original.FullOutput);
	// ok is false when it cannot.
	ReadFile(path string) (text string, ok bool)
}

// Original is a folded block as a store reads it back: its text, what
// served it and how far to trust it; or, when nothing can serve it, why.
type Original struct {
	// Text is the block's text; Why is set instead when there is none.
	Text, Why string
	// Label names the block and what served it; Note is the route note
	// (Verified, Legacy, a Fallback); Source names the text in slice
	// notes (SourceLedger, SourceStore, …).
	Label, Note, Source string
	// Unverified marks text not known to be the folded bytes.
	Unverified bool
	// FullOutput is the tool's own file holding the output the block
	// truncated, for line and grep reads; "" for none.
	FullOutput string
}

// Request is a recall_folded call.
type Request struct {
	// Code is one code, as the hints the model reads spell it
	// (recall_folded code=x1y2z3); it is read before Codes.
	Code                       string
	Codes                      []string
	Chars, Lines, Grep, Search string
	// Spelling is how the answer's hints name options.
	Spelling Spelling
}

// Reply is recall_folded's answer: its text, and per code what came of it.
type Reply struct {
	Text string
	// IsError: the call was refused (a malformed range) or every code it
	// named failed.
	IsError bool
	// Recalled, Errors and Missing are the codes served, the folded ones
	// that could not be, and the inputs that name no folded block (as
	// typed). Own are the codes served or failed that the first store
	// holds.
	Recalled, Errors, Missing, Own []string
	// Searched is the search term; Hits the codes it found.
	Searched string
	Hits     []string
}

// JoinCodes returns the codes a call names: code, the single form every
// hint prints, then codes, the list form, without repeats. Both tools take
// both, so that a model following a hint word for word is answered.
func JoinCodes(code string, codes []string) []string {
	if code == "" {
		return codes
	}
	out := []string{code}
	for _, c := range codes {
		if c != code {
			out = append(out, c)
		}
	}
	return out
}

// Answer answers r from stores: the caller's conversation first, then the
// ones a code it did not fold may be read from (a Pi session's parent, the
// other conversations of a proxied client session). A search sweeps the
// first store only.
func Answer(stores []Store, r Request) Reply {
	rep := Reply{Recalled: []string{}, Errors: []string{}, Missing: []string{}}
	// A malformed range is refused whole, before anything is read: an
	// answer of empty bodies each saying "malformed" reads as a success.
	switch {
	case r.Chars != "" && !ValidChars(r.Chars):
		rep.Text, rep.IsError = MalformedChars(r.Chars), true
		return rep
	case r.Lines != "" && !ValidLines(r.Lines):
		rep.Text, rep.IsError = MalformedLines(r.Lines), true
		return rep
	}
	r.Codes = JoinCodes(r.Code, r.Codes)
	if r.Search != "" && len(r.Codes) == 0 {
		return search(stores[0], r.Search, r.Spelling)
	}
	if len(r.Codes) == 0 {
		rep.Text = NoCodesRecall
		return rep
	}
	opts := Options{Chars: r.Chars, Lines: r.Lines, Grep: r.Grep, Spelling: r.Spelling}
	if opts.Grep == "" {
		opts.Grep = r.Search // codes plus search greps those codes
	}
	var matches []Match
	var failures []Failure
	for _, raw := range r.Codes {
		code, valid := digest.ParseCode(raw)
		var st Store
		var rec registry.Record
		for i, s := range stores {
			if !valid {
				break
			}
			if r, ok := s.Lookup(code); ok {
				st, rec = s, r
				if i == 0 {
					rep.Own = append(rep.Own, code)
				}
				break
			}
		}
		if st == nil {
			rep.Missing = append(rep.Missing, raw)
			continue
		}
		o := st.Read(rec)
		if o.Why != "" {
			failures = append(failures, Failure{Code: code, Message: Unavailable(o.Why)})
			rep.Errors = append(rep.Errors, code)
			continue
		}
		text, source, gone := o.Text, o.Source, ""
		// A chars read is not partial: it pages the text the sha256
		// verified, whose positions the other reads' hints name.
		if opts.Partial() && o.FullOutput != "" {
			if full, ok := st.ReadFile(o.FullOutput); ok {
				text, source = full, SourceFullOutput
			} else {
				gone = FullOutputGone
			}
		}
		out, note := Slice(text, opts, source)
		matches = append(matches, Match{Code: code, Label: o.Label, Note: Notes(o.Note, gone, note), Text: out})
		rep.Recalled = append(rep.Recalled, code)
	}
	rep.Text = RenderRecall(matches, failures, rep.Missing)
	rep.IsError = len(matches) == 0 && len(failures) > 0
	return rep
}

// search sweeps term over the blocks st has folded. A block that cannot be
// read back is left out, and the answer says so; one whose text is not
// known to be the folded bytes is searched and marked.
func search(st Store, term string, sp Spelling) Reply {
	rep := Reply{Recalled: []string{}, Errors: []string{}, Missing: []string{}, Searched: term, Hits: []string{}}
	var blocks []Block
	var warnings []string
	for _, rec := range st.Folded() {
		o := st.Read(rec)
		if o.Why != "" {
			warnings = append(warnings, NotSearched(rec.Code, o.Why))
			continue
		}
		blocks = append(blocks, Block{Code: rec.Code, Label: o.Label, Note: o.Note, Text: o.Text, Unverified: o.Unverified})
	}
	hits, _, note := Search(blocks, term, sp)
	for _, h := range hits {
		rep.Hits = append(rep.Hits, h.Code)
	}
	rep.Text = RenderSearch(term, hits, note, warnings)
	return rep
}
