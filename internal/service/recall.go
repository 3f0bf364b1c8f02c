package service

import (
	"errors"
	"os"
	"strconv"

	"github.com/contextfold/contextfold/internal/digest"
	"github.com/contextfold/contextfold/internal/engine"
	"github.com/contextfold/contextfold/internal/ledger"
	"github.com/contextfold/contextfold/internal/recall"
	"github.com/contextfold/contextfold/internal/registry"
	"github.com/contextfold/contextfold/internal/wire"
)

// RecallDetails are recall_folded's structured details for Pi.
type RecallDetails struct {
	Recalled []string `json:"recalled"`
	Missing  []string `json:"missing"`
	Errors   []string `json:"errors"`
	Searched string   `json:"searched,omitempty"`
	Hits     []string `json:"hits,omitempty"`
}

// ledgerFor returns the session's ledger, read from the session file (and
// refreshed with what Pi appended since), or parsed from the entries the
// adapter sent for a session without a file.
func (s *Service) ledgerFor(ss *session, entries []byte) (*ledger.Ledger, error) {
	if ss.file != "" {
		if ss.led != nil {
			_, err := ss.led.Refresh(ss.file)
			if err == nil {
				return ss.led, nil
			}
			if !errors.Is(err, ledger.ErrRewritten) {
				return nil, err
			}
		}
		led, err := ledger.ReadFile(ss.file)
		if err != nil {
			return nil, err
		}
		ss.led = led
		return led, nil
	}
	if len(entries) == 0 {
		return nil, errors.New("no session file and no entries")
	}
	head := `{"type":"session","version":3,"id":` + string(quote(ss.id)) + "}\n"
	return ledger.Parse(append([]byte(head), entries...))
}

func quote(s string) []byte {
	b, _ := marshalString(s)
	return b
}

// source is one route's answer for a folded record: text, label, notes.
type source struct {
	text, label, note, fullOutput string
	ok, live                      bool
	why                           string
}

// locate finds a folded record's exact bytes: the ledger (sha256-verified),
// else the live block with a warning, else an explanation (EDGES 24: every
// route says what it served).
func (s *Service) locate(ss *session, led *ledger.Ledger, ledErr error, rec *registry.Record) source {
	tool := rec.Tool
	if tool == "" {
		tool = rec.Kind
	}
	var why string
	if led != nil {
		f, err := led.Locate(rec.ID, rec.SHA256)
		switch {
		case err == nil:
			note := recall.Verified
			if rec.SHA256 == "" {
				note = recall.Legacy
			}
			return source{text: f.Text, label: recall.LedgerLabel(tool), note: note, fullOutput: f.FullOutputPath, ok: true}
		case errors.Is(err, ledger.ErrSHAMismatch):
			why = recall.WhyMismatch(rec.Code)
		default:
			why = recall.WhyNotFound(rec.Code)
		}
	} else {
		why = recall.WhyNoLedger(rec.Code)
		if ledErr != nil {
			why += " (" + ledErr.Error() + ")"
		}
	}
	if b, ok := ss.eng.Live(rec.ID); ok {
		return source{text: b.Text, label: recall.LiveLabel(b.Kind.String(), b.ToolName, b.Turn, 0), note: recall.Fallback(why), fullOutput: b.FullOutputPath, ok: true, live: true}
	}
	return source{why: why}
}

func (s *Service) recall(p RecallParams) (*ToolResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	det := RecallDetails{Recalled: []string{}, Missing: []string{}, Errors: []string{}}
	// A malformed range is refused whole, before anything is read: an
	// answer of empty bodies each saying "malformed" reads as a success.
	if p.Chars != "" && !recall.ValidChars(p.Chars) {
		return &ToolResult{Text: recall.MalformedChars(p.Chars), Details: det, IsError: true}, nil
	}
	if p.Lines != "" && !recall.ValidLines(p.Lines) {
		return &ToolResult{Text: recall.MalformedLines(p.Lines), Details: det, IsError: true}, nil
	}
	sp := recall.ToolArgs
	if p.CLI {
		sp = recall.CLIFlags
	}
	led, ledErr := s.ledgerFor(ss, []byte(p.Entries))
	if p.Search != "" && len(p.Codes) == 0 {
		return s.search(ss, led, ledErr, p.Search, sp), nil
	}
	if len(p.Codes) == 0 {
		return &ToolResult{Text: recall.NoCodesRecall, Details: det}, nil
	}
	opts := recall.Options{Chars: p.Chars, Lines: p.Lines, Grep: p.Grep, Spelling: sp}
	if opts.Grep == "" {
		opts.Grep = p.Search // codes plus search greps those codes
	}
	var matches []recall.Match
	var failures []recall.Failure
	for _, raw := range p.Codes {
		code, ok := digest.ParseCode(raw)
		var rec *registry.Record
		if ok {
			rec, ok = ss.eng.Registry().ByCode(code)
		}
		if !ok {
			if m, f, found := s.fromParent(ss, led, code, opts); found {
				if f != nil {
					failures = append(failures, *f)
					det.Errors = append(det.Errors, code)
				} else {
					matches = append(matches, *m)
					det.Recalled = append(det.Recalled, code)
				}
				continue
			}
			det.Missing = append(det.Missing, raw)
			continue
		}
		ss.recalls[code]++
		ss.recallCalls++
		src := s.locate(ss, led, ledErr, rec)
		if !src.ok {
			failures = append(failures, recall.Failure{Code: code, Message: recall.Unavailable(src.why)})
			det.Errors = append(det.Errors, code)
			continue
		}
		text, sourceName, extra := src.text, recall.SourceLedger, ""
		if src.live {
			sourceName = recall.SourceLive
		}
		// A chars read is not partial: it pages the text the sha256
		// verified, whose positions the other reads' hints name.
		if opts.Partial() && src.fullOutput != "" {
			if data, err := os.ReadFile(src.fullOutput); err == nil {
				text, sourceName = string(data), recall.SourceFullOutput
			} else {
				extra = recall.FullOutputGone
			}
		}
		out, note := recall.Slice(text, opts, sourceName)
		matches = append(matches, recall.Match{Code: code, Label: src.label, Note: recall.Notes(src.note, extra, note), Text: out})
		det.Recalled = append(det.Recalled, code)
	}
	return &ToolResult{Text: recall.RenderRecall(matches, failures, det.Missing), Details: det}, nil
}

// search sweeps every folded block: live ones from history, compacted ones
// from the session file. Every block searched carries its route note, and
// one whose text is not known to be the folded bytes is marked Unverified;
// a compacted block whose session-file text fails its check is left out,
// and the answer says so, as it does when there is no session file to read.
func (s *Service) search(ss *session, led *ledger.Ledger, ledErr error, term string, sp recall.Spelling) *ToolResult {
	ss.recallCalls++
	var blocks []recall.Block
	var warnings []string
	seen := map[string]bool{}
	for _, b := range ss.eng.Transcript().Blocks() {
		if !ss.eng.Frozen(b.ID) || seen[b.ID] {
			continue
		}
		seen[b.ID] = true
		rec, _ := ss.eng.Registry().Get(b.ID)
		note, unverified := recall.Verified, false
		code := ss.eng.Code(b.ID)
		switch {
		case rec == nil:
			note, unverified = recall.NoRecord, true
		case rec.SHA256 == "":
			note, unverified = recall.Legacy, true
		case registry.Sum(b.Text) != rec.SHA256:
			note, unverified = recall.Mismatch, true
		}
		if rec != nil {
			code = rec.Code
		}
		blocks = append(blocks, recall.Block{Code: code, Label: recall.LiveLabel(b.Kind.String(), b.ToolName, b.Turn, 0), Note: note, Text: b.Text, Unverified: unverified})
	}
	unread := 0
	for _, rec := range ss.eng.Registry().All() {
		if seen[rec.ID] || ss.eng.Unfolded(rec.ID) {
			continue
		}
		if _, live := ss.eng.Live(rec.ID); live {
			continue
		}
		if led == nil {
			unread++
			continue
		}
		f, err := led.Locate(rec.ID, rec.SHA256)
		switch {
		case errors.Is(err, ledger.ErrSHAMismatch):
			warnings = append(warnings, recall.NotSearched(rec.Code, recall.WhyMismatch(rec.Code)))
			continue
		case err != nil:
			warnings = append(warnings, recall.NotSearched(rec.Code, recall.WhyNotFound(rec.Code)))
			continue
		}
		tool := rec.Tool
		if tool == "" {
			tool = rec.Kind
		}
		note, unverified := recall.Verified, false
		if rec.SHA256 == "" {
			note, unverified = recall.Legacy, true
		}
		blocks = append(blocks, recall.Block{Code: rec.Code, Label: recall.CompactedLabel(tool), Note: note, Text: f.Text, Unverified: unverified})
	}
	if unread > 0 {
		why := "no readable session file"
		if ledErr != nil {
			why += " (" + ledErr.Error() + ")"
		}
		noun := " compacted blocks"
		if unread == 1 {
			noun = " compacted block"
		}
		warnings = append(warnings, strconv.Itoa(unread)+noun+" not searched: "+why)
	}
	hits, _, note := recall.Search(blocks, term, sp)
	det := RecallDetails{Recalled: []string{}, Missing: []string{}, Errors: []string{}, Searched: term, Hits: []string{}}
	for _, h := range hits {
		det.Hits = append(det.Hits, h.Code)
	}
	return &ToolResult{Text: recall.RenderSearch(term, hits, note, warnings), Details: det}
}

// UnfoldDetails are unfold's structured details.
type UnfoldDetails struct {
	Unfolded  []string `json:"unfolded"`
	Already   []string `json:"already"`
	Missing   []string `json:"missing"`
	Compacted []string `json:"compacted"`
}

func renderUnfold(ss *session, raw []string, res []engine.UnfoldResult) *ToolResult {
	var u recall.Unfold
	det := UnfoldDetails{Unfolded: []string{}, Already: []string{}, Missing: []string{}, Compacted: []string{}}
	for i, r := range res {
		in := r.Code
		if i < len(raw) {
			in = raw[i]
		}
		switch r.Status {
		case engine.Released:
			label := r.ID
			if b, ok := ss.eng.Live(r.ID); ok {
				label = recall.LiveLabel(b.Kind.String(), b.ToolName, b.Turn, 0)
			}
			u.Expanded = append(u.Expanded, recall.Match{Code: r.Code, Label: label})
			det.Unfolded = append(det.Unfolded, r.Code)
		case engine.Already:
			u.Already = append(u.Already, r.Code)
			det.Already = append(det.Already, r.Code)
		case engine.Compacted:
			u.Compacted = append(u.Compacted, in)
			det.Compacted = append(det.Compacted, in)
		default:
			u.Missing = append(u.Missing, in)
			det.Missing = append(det.Missing, in)
		}
	}
	text := recall.RenderUnfold(u)
	if len(det.Unfolded) > 0 && wire.Preserved(ss.eng.Model(ss.model)) {
		// The provider binds thinking to everything before it: restoring a
		// block changes that prefix for the reasoning after it, and a
		// restored thinking block is bound to a prefix earlier folds changed.
		text += "\nnote: this model binds its reasoning to the conversation before it: the provider drops reasoning produced before this point that follows a restored block, and a restored thinking block reaches the model only if nothing before it changed since; recall_folded reads any folded block's text."
	}
	return &ToolResult{Text: text, Details: det}
}

// fromParent serves a code this session never folded from the session it
// was handed off from, verified against the parent's session file and
// labelled as such. found is false when there is no parent or the parent
// never folded the code either.
func (s *Service) fromParent(ss *session, led *ledger.Ledger, code string, opts recall.Options) (*recall.Match, *recall.Failure, bool) {
	p := s.parentFor(ss, led)
	if p == nil {
		return nil, nil, false
	}
	if p.err != nil {
		return nil, &recall.Failure{Code: code, Message: recall.Unavailable("the parent session file " + p.file + " cannot be read (" + p.err.Error() + ")")}, true
	}
	rec, ok := p.codes[code]
	if !ok {
		return nil, nil, false
	}
	tool := rec.Tool
	if tool == "" {
		tool = rec.Kind
	}
	f, err := p.led.Locate(rec.ID, rec.SHA256)
	if err != nil {
		why := recall.WhyNotFound(code)
		if errors.Is(err, ledger.ErrSHAMismatch) {
			why = recall.WhyMismatch(code)
		}
		return nil, &recall.Failure{Code: code, Message: recall.Unavailable(why + " (parent session " + p.file + ")")}, true
	}
	note := recall.Verified
	if rec.SHA256 == "" {
		note = recall.Legacy
	}
	out, sliceNote := recall.Slice(f.Text, opts, recall.SourceParent)
	return &recall.Match{Code: code, Label: recall.ParentLabel(tool), Note: recall.Notes(note, "from "+p.file, sliceNote), Text: out}, nil, true
}
