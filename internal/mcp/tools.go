package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/contextfold/contextfold/internal/digest"
	"github.com/contextfold/contextfold/internal/foldstore"
	"github.com/contextfold/contextfold/internal/recall"
	"github.com/contextfold/contextfold/internal/registry"
)

// The tools' texts: those of the Pi extension (extension/tools.ts; a test
// keeps them equal), with unfold's timing as the proxy applies it.
const (
	recallDescription = "Read back the exact original of a block shown as {#<code> FOLDED} (an older tool result or thinking that was folded to a short digest; its error lines stay visible in the digest). Bounded: whole reads are capped; slice with grep=<term> or lines=<a-b>; search=<term> without codes finds which folded block holds a term. Read-only: blocks stay folded. If a narrower command or a file read gets the detail more cheaply, do that instead."
	unfoldDescription = "Restore folded blocks ({#<code> FOLDED}) to their full content in your context from the next request on, for good. Costs their full size on every later request: prefer recall_folded for a one-time read."
	codesDescription  = "Fold codes from {#<code> FOLDED} tags in your context (bare code or the whole tag). Omit when using `search`."
	grepDescription   = "Return only lines containing this text (case-insensitive)."
	linesDescription  = `Return only a line range, 1-based inclusive, e.g. "40-80".`
	searchDescription = "Find WHICH folded blocks hold this text: one bounded sweep over every folded block, hits grouped by code."
	unfoldCodes       = "Fold codes from {#<code> FOLDED} tags (bare code or the whole tag)."
)

func schema(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // static maps
	}
	return b
}

// Tools returns recall_folded and unfold over the fold store in dir.
func Tools(dir string) []Tool {
	st := store{dir: dir}
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	return []Tool{
		{
			Name: "recall_folded", Title: "Recall folded context", Description: recallDescription,
			InputSchema: schema(map[string]any{"type": "object", "properties": map[string]any{
				"codes":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": codesDescription},
				"grep":   str(grepDescription),
				"lines":  str(linesDescription),
				"search": str(searchDescription),
			}}),
			Call: st.recall,
		},
		{
			Name: "unfold", Title: "Unfold context", Description: unfoldDescription,
			InputSchema: schema(map[string]any{"type": "object", "required": []string{"codes"}, "properties": map[string]any{
				"codes": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": unfoldCodes},
			}}),
			Call: st.unfold,
		},
	}
}

// store reads the fold store's conversation files afresh on every call:
// the proxy appends to them while this server runs.
type store struct{ dir string }

// found is a folded block located in the store.
type found struct {
	path     string
	rec      registry.Record
	text     foldstore.Text
	ok       bool // the store holds its text
	unfolded bool // an unfold released it
}

// files reads every conversation file, newest first.
func (s store) files() ([]string, []*foldstore.Contents, error) {
	paths, err := foldstore.Files(s.dir)
	if err != nil {
		return nil, nil, err
	}
	var ps []string
	var cs []*foldstore.Contents
	for _, p := range paths {
		c, err := foldstore.ReadFile(p)
		if err != nil {
			continue // not a conversation file, or one being created
		}
		ps, cs = append(ps, p), append(cs, c)
	}
	return ps, cs, nil
}

// lookup finds codes in the newest conversation that folded each.
func (s store) lookup(codes []string) (map[string]found, error) {
	paths, contents, err := s.files()
	if err != nil {
		return nil, err
	}
	out := map[string]found{}
	for i, c := range contents {
		recs, released := c.Records(), c.Unfolded()
		for _, code := range codes {
			if _, done := out[code]; done {
				continue
			}
			if rec, ok := recs[code]; ok {
				t, has := c.Texts[rec.ID]
				out[code] = found{path: paths[i], rec: rec, text: t, ok: has, unfolded: released[rec.ID]}
			}
		}
	}
	return out, nil
}

type recallArgs struct {
	Codes  []string `json:"codes"`
	Grep   string   `json:"grep"`
	Lines  string   `json:"lines"`
	Search string   `json:"search"`
}

func toolName(rec registry.Record) string {
	if rec.Tool != "" {
		return rec.Tool
	}
	return rec.Kind
}

func (s store) recall(_ context.Context, raw json.RawMessage) (string, bool) {
	var a recallArgs
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &a); err != nil {
			return "recall_folded: bad arguments: " + err.Error(), true
		}
	}
	if a.Lines != "" && !recall.ValidLines(a.Lines) {
		return recall.MalformedLines(a.Lines), true
	}
	if a.Search != "" && len(a.Codes) == 0 {
		return s.search(a.Search)
	}
	if len(a.Codes) == 0 {
		return recall.NoCodesRecall, false
	}
	opts := recall.Options{Lines: a.Lines, Grep: a.Grep}
	if opts.Grep == "" {
		opts.Grep = a.Search
	}
	codes := make([]string, len(a.Codes))
	for i, c := range a.Codes {
		codes[i], _ = digest.ParseCode(c)
	}
	at, err := s.lookup(codes)
	if err != nil {
		return recall.Unavailable("the fold record cannot be read: " + err.Error()), true
	}
	var matches []recall.Match
	var failures []recall.Failure
	var missing []string
	for i, code := range codes {
		f, ok := at[code]
		switch {
		case code == "" || !ok:
			missing = append(missing, a.Codes[i])
		case !f.ok:
			failures = append(failures, recall.Failure{Code: code, Message: recall.Unavailable("the fold record holds no text for " + code)})
		case !f.text.Verified(&f.rec):
			failures = append(failures, recall.Failure{Code: code, Message: recall.Unavailable(recall.WhyMismatch(code))})
		default:
			out, note := recall.Slice(f.text.Text, opts, recall.SourceStore)
			matches = append(matches, recall.Match{Code: code, Label: recall.StoreLabel(toolName(f.rec)), Note: recall.Notes(recall.Verified, note), Text: out})
		}
	}
	return recall.RenderRecall(matches, failures, missing), len(matches) == 0 && len(failures) > 0
}

// search sweeps the folded blocks of every conversation, newest first. A
// block whose text fails its check is left out, and the answer says so.
func (s store) search(term string) (string, bool) {
	_, contents, err := s.files()
	if err != nil {
		return recall.Unavailable("the fold record cannot be read: " + err.Error()), true
	}
	var blocks []recall.Block
	var warnings []string
	seen := map[string]bool{}
	for _, c := range contents {
		for code, rec := range c.Records() {
			if seen[code] {
				continue
			}
			seen[code] = true
			t, ok := c.Texts[rec.ID]
			switch {
			case !ok:
				warnings = append(warnings, recall.NotSearched(code, "the fold record holds no text for it"))
			case !t.Verified(&rec):
				warnings = append(warnings, recall.NotSearched(code, recall.WhyMismatch(code)))
			default:
				blocks = append(blocks, recall.Block{Code: code, Label: recall.StoreLabel(toolName(rec)), Note: recall.Verified, Text: t.Text})
			}
		}
	}
	// Map order is random; the sweep reads blocks in a fixed order.
	sortBlocks(blocks)
	hits, _, note := recall.Search(blocks, term)
	return recall.RenderSearch(term, hits, note, warnings), false
}

func sortBlocks(bs []recall.Block) {
	sort.Slice(bs, func(i, j int) bool { return bs[i].Code < bs[j].Code })
}

func (s store) unfold(_ context.Context, raw json.RawMessage) (string, bool) {
	var a struct {
		Codes []string `json:"codes"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return "unfold: bad arguments: " + err.Error(), true
	}
	if len(a.Codes) == 0 {
		return recall.NoCodes, false
	}
	codes := make([]string, len(a.Codes))
	for i, c := range a.Codes {
		codes[i], _ = digest.ParseCode(c)
	}
	at, err := s.lookup(codes)
	if err != nil {
		return "unfold failed: the fold record cannot be read: " + err.Error(), true
	}
	var u recall.Unfold
	byFile := map[string][]string{}
	var order []string
	for i, code := range codes {
		f, ok := at[code]
		if code == "" || !ok {
			u.Missing = append(u.Missing, a.Codes[i])
			continue
		}
		if f.unfolded {
			u.Already = append(u.Already, code)
			continue
		}
		if _, seen := byFile[f.path]; !seen {
			order = append(order, f.path)
		}
		byFile[f.path] = append(byFile[f.path], code)
		u.Expanded = append(u.Expanded, recall.Match{Code: code, Label: recall.StoreLabel(toolName(f.rec))})
	}
	for _, p := range order {
		if err := foldstore.RequestUnfold(p, byFile[p]); err != nil {
			return fmt.Sprintf("unfold failed: %v", err), true
		}
	}
	return recall.RenderUnfold(u), false
}
