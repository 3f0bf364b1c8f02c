package service

import (
	"errors"
	"os"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/core/wire"
	"github.com/contextfold/contextfold/internal/pi/ledger"
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

// sessionStore is the session's folded blocks for recall: the engine's
// fold records, read back from the session file (sha256-verified), or,
// when it cannot serve one, from live history, with a warning (docs/EDGES.md #24:
// every route says what it served).
type sessionStore struct {
	ss     *session
	led    *ledger.Ledger
	ledErr error
}

func (st sessionStore) Lookup(code string) (registry.Record, bool) {
	rec, ok := st.ss.eng.Registry().ByCode(code)
	if !ok {
		return registry.Record{}, false
	}
	return *rec, true
}

// Folded returns the blocks folded in live history, in its order, then
// those that left it (compacted), as the registry orders them.
func (st sessionStore) Folded() []registry.Record {
	eng := st.ss.eng
	var out []registry.Record
	seen := map[string]bool{}
	for _, b := range eng.Transcript().Blocks() {
		if !eng.Frozen(b.ID) || seen[b.ID] {
			continue
		}
		seen[b.ID] = true
		if rec, ok := eng.Registry().Get(b.ID); ok {
			out = append(out, *rec)
		}
	}
	for _, rec := range eng.Registry().All() {
		if _, live := eng.Live(rec.ID); !seen[rec.ID] && !live && !eng.Unfolded(rec.ID) {
			out = append(out, *rec)
		}
	}
	return out
}

func (st sessionStore) Read(rec registry.Record) recall.Original {
	tool := rec.Tool
	if tool == "" {
		tool = rec.Kind
	}
	var why string
	if st.led != nil {
		f, err := st.led.Locate(rec.ID, rec.SHA256)
		switch {
		case err == nil:
			o := recall.Original{Text: f.Text, Label: recall.LedgerLabel(tool), Note: recall.Verified, Source: recall.SourceLedger, FullOutput: f.FullOutputPath}
			if rec.SHA256 == "" {
				o.Note, o.Unverified = recall.Legacy, true
			}
			return o
		case errors.Is(err, ledger.ErrSHAMismatch):
			why = recall.WhyMismatch(rec.Code)
		default:
			why = recall.WhyNotFound(rec.Code)
		}
	} else {
		why = recall.WhyNoLedger(rec.Code)
		if st.ledErr != nil {
			why += " (" + st.ledErr.Error() + ")"
		}
	}
	if b, ok := st.ss.eng.Live(rec.ID); ok {
		return recall.Original{Text: b.Text, Label: recall.LiveLabel(b.Kind.String(), b.ToolName, b.Turn, 0), Note: recall.Fallback(why),
			Source: recall.SourceLive, Unverified: true, FullOutput: b.FullOutputPath}
	}
	return recall.Original{Why: why}
}

func (sessionStore) ReadFile(path string) (string, bool) {
	data, err := os.ReadFile(path)
	return string(data), err == nil
}

// answer answers r from the session's blocks and its parent's; entries
// are the session's entries when it has no file.
func (s *Service) answer(r recall.Request, entries string) (recall.Reply, error) {
	ss := s.s
	if ss == nil {
		return recall.Reply{}, errNotOpen
	}
	rep := recall.Answer(s.storesFor(ss, []byte(entries)), r)
	if rep.Searched != "" {
		ss.recallCalls++
	}
	for _, code := range rep.Own {
		ss.recalls[code]++
		ss.recallCalls++
	}
	return rep, nil
}

// storesFor returns the stores a recall reads: the session's own, then its
// parent's.
func (s *Service) storesFor(ss *session, entries []byte) []recall.Store {
	led, ledErr := s.ledgerFor(ss, entries)
	stores := []recall.Store{sessionStore{ss, led, ledErr}}
	if pa := s.parentFor(ss, led); pa != nil {
		stores = append(stores, pa)
	}
	return stores
}

func (s *Service) recall(p RecallParams) (*ToolResult, error) {
	rep, err := s.answer(recall.Request{Code: p.Code, Codes: p.Codes, Chars: p.Chars, Lines: p.Lines, Grep: p.Grep, Search: p.Search}, p.Entries)
	if err != nil {
		return nil, err
	}
	det := RecallDetails{Recalled: rep.Recalled, Missing: rep.Missing, Errors: rep.Errors, Searched: rep.Searched, Hits: rep.Hits}
	return &ToolResult{Text: rep.Text, Details: det, IsError: rep.IsError}, nil
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

// The parent session (the one this session was handed off from) is a
// store of its own: a code this session never folded is read from it,
// verified against the parent's session file and labelled as such.

func (p *parent) Lookup(code string) (registry.Record, bool) {
	if p.err != nil {
		// Its codes are unknown: every code this session did not fold may
		// be the parent's, and the answer says why it cannot be read.
		return registry.Record{Code: code}, true
	}
	rec, ok := p.codes[code]
	return rec, ok
}

// Folded returns nothing: a search sweeps this session's blocks only.
func (p *parent) Folded() []registry.Record { return nil }

func (p *parent) Read(rec registry.Record) recall.Original {
	if p.err != nil {
		return recall.Original{Why: "the parent session file " + p.file + " cannot be read (" + p.err.Error() + ")"}
	}
	tool := rec.Tool
	if tool == "" {
		tool = rec.Kind
	}
	f, err := p.led.Locate(rec.ID, rec.SHA256)
	if err != nil {
		why := recall.WhyNotFound(rec.Code)
		if errors.Is(err, ledger.ErrSHAMismatch) {
			why = recall.WhyMismatch(rec.Code)
		}
		return recall.Original{Why: why + " (parent session " + p.file + ")"}
	}
	note := recall.Verified
	if rec.SHA256 == "" {
		note = recall.Legacy
	}
	return recall.Original{Text: f.Text, Label: recall.ParentLabel(tool), Note: recall.Notes(note, "from "+p.file), Source: recall.SourceParent, Unverified: rec.SHA256 == ""}
}

// ReadFile reads nothing: the parent's blocks are read from its session
// file alone.
func (p *parent) ReadFile(string) (string, bool) { return "", false }
