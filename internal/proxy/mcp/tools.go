package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// The tools' texts: those of the Pi extension (extension/tools.ts; a test
// keeps them equal), with unfold's timing as the proxy applies it.
const (
	recallDescription = "Read back the exact original of a block shown as {#<code> FOLDED} (an older tool result or thinking that was folded to a short digest; its error lines stay visible in the digest). Bounded: whole reads are capped; slice with grep=<term>, lines=<a-b> or chars=<a-b>; search=<term> without codes finds which folded block holds a term. Read-only: blocks stay folded. If a narrower command or a file read gets the detail more cheaply, do that instead."
	unfoldDescription = "Restore folded blocks ({#<code> FOLDED}) to their full content in your context from the next request on, for good. Costs their full size on every later request: prefer recall_folded for a one-time read."
	codeDescription   = "One fold code (as hints name it)."
	codesDescription  = "Fold codes from {#<code> FOLDED} tags in your context (bare code or the whole tag). Omit when using `search`."
	grepDescription   = "Return only lines containing this text (case-insensitive)."
	linesDescription  = `Return only a line range, 1-based inclusive, e.g. "40-80".`
	charsDescription  = `Return characters of the block verbatim, 1-based inclusive (UTF-16 units), e.g. "1-7200"; 7200 at most per read. For lines too long to read whole.`
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
	return store{dir: dir, wait: callWait, now: time.Now, sleep: time.Sleep}.tools()
}

// ToolsOf returns recall_folded and unfold over the store r reads (the
// database's, package pgstore).
func ToolsOf(r foldstore.Reader) []Tool {
	return store{r: r, wait: callWait, now: time.Now, sleep: time.Sleep}.tools()
}

func (st store) tools() []Tool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	return []Tool{
		{
			Name: "recall_folded", Title: "Recall folded context", Description: recallDescription,
			InputSchema: schema(map[string]any{"type": "object", "properties": map[string]any{
				"code":   str(codeDescription),
				"codes":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": codesDescription},
				"grep":   str(grepDescription),
				"lines":  str(linesDescription),
				"chars":  str(charsDescription),
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

// store reads the fold store's conversations afresh on every call: the
// proxy records to them while this server runs.
type store struct {
	// r reads the store; nil: the file store in dir.
	r     foldstore.Reader
	dir   string
	wait  time.Duration // how long to look for the call the proxy notes
	now   func() time.Time
	sleep func(time.Duration)
}

// reader is what reads the store.
func (s store) reader() foldstore.Reader {
	if s.r != nil {
		return s.r
	}
	return foldstore.DirReader{Dir: s.dir}
}

// How a call is matched to its conversation (see caller).
const (
	// callWait bounds the wait for the proxy's note of a call whose id
	// the client gave: it is written before the client has the call, so
	// it is normally there at once.
	callWait = 2 * time.Second
	// callAge is how old a noted call may be and still be this one, when
	// the client gave its id.
	callAge = 10 * time.Minute
	// callFresh is how old it may be when matched by tool and arguments
	// only: a client runs the call as soon as the response ends, and an
	// older note of the same call may be another conversation's whose own
	// note is missing (a request the proxy did not fold).
	callFresh = 30 * time.Second
	// callTail is how much of a file's end is read for noted calls.
	callTail = 256 << 10
	// callTie: two conversations that made the same call this close in
	// time cannot be told apart.
	callTie = 30 * time.Second
)

// callIDs are the _meta fields in which clients give the model's call id:
// Claude Code's, Codex's.
var callIDs = []string{"claudecode/toolUseId", "callId"}

// caller returns the file of the conversation a call of tool comes from,
// or "" when it cannot tell: recall and unfold then refuse, they never
// guess. The proxy notes each call of these tools as the response making
// it streams (proxy.watchCalls). A call matches a note of the same tool
// with the same arguments, and, when the client gives the model's call id
// in _meta (Claude Code, Codex), the same id: ids alone do not tell
// conversations apart (a local model server numbers its calls call_1,
// call_2, … in every conversation). Without an id (opencode) only a fresh
// note matches. Of several matching notes the newest names the caller,
// unless another conversation's is about as new: then it cannot tell.
func (s store) caller(ctx context.Context, tool string, args, meta json.RawMessage) string {
	var m map[string]any
	json.Unmarshal(meta, &m)
	id := ""
	for _, k := range callIDs {
		if v, ok := m[k].(string); ok && v != "" {
			id = v
			break
		}
	}
	wait := s.wait
	if id == "" {
		wait /= 8 // nothing names the call: it is there at once or not at all
	}
	deadline := s.now().Add(wait)
	for {
		path, found := s.match(tool, id, args)
		if found || s.now().After(deadline) || ctx.Err() != nil {
			return path
		}
		s.sleep(50 * time.Millisecond)
	}
}

// match looks for the call once; found says the answer is final.
func (s store) match(tool, id string, args json.RawMessage) (path string, found bool) {
	r := s.reader()
	convs, err := r.Conversations()
	if err != nil {
		return "", false
	}
	now := s.now()
	var want any
	json.Unmarshal(args, &want)
	type hit struct {
		path string
		at   time.Time
	}
	var hits []hit
	for _, conv := range convs {
		p := conv.Name
		if now.Sub(conv.Written) > callAge {
			break // listed newest first: the rest are older still
		}
		calls, err := r.RecentCalls(p, callTail)
		if err != nil {
			continue
		}
		for _, c := range calls {
			switch {
			case !strings.HasSuffix(c.Name, tool):
				continue
			case id != "" && c.ID != id:
				continue
			case id == "" && now.Sub(c.At) > callFresh:
				continue
			}
			var got any
			if json.Unmarshal([]byte(c.Args), &got) == nil && reflect.DeepEqual(got, want) {
				hits = append(hits, hit{p, c.At})
			}
		}
	}
	if len(hits) == 0 {
		return "", false
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].at.After(hits[j].at) })
	for _, h := range hits[1:] {
		if h.path != hits[0].path && hits[0].at.Sub(h.at) < callTie {
			return "", true // two conversations made the same call: not told apart
		}
	}
	return hits[0].path, true
}

// session reads the conversation file at path and, after it, the other
// conversations of its client session (Claude Code's subagents share their
// parent's session: a subagent may be handed its parent's code). A
// conversation of another session is never read.
func (s store) session(path string) ([]string, []*foldstore.Contents, error) {
	r := s.reader()
	own, err := r.Read(path)
	if err != nil {
		return nil, nil, err
	}
	paths, convs := []string{path}, []*foldstore.Contents{own}
	if own.Session == "" {
		return paths, convs, nil
	}
	all, err := r.Conversations()
	if err != nil {
		return nil, nil, err
	}
	for _, l := range all {
		p := l.Name
		if p == path {
			continue
		}
		if c, err := r.Read(p); err == nil && c.Session == own.Session {
			paths, convs = append(paths, p), append(convs, c)
		}
	}
	return paths, convs, nil
}

type recallArgs struct {
	Code   string   `json:"code"`
	Codes  []string `json:"codes"`
	Grep   string   `json:"grep"`
	Lines  string   `json:"lines"`
	Chars  string   `json:"chars"`
	Search string   `json:"search"`
}

func (s store) recall(ctx context.Context, raw, meta json.RawMessage) (string, bool) {
	var a recallArgs
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &a); err != nil {
			return "recall_folded: bad arguments: " + err.Error(), true
		}
	}
	// The caller's conversation: codes are read from it (and from the
	// other conversations of its client session), search sweeps only it.
	// When the caller cannot be placed, nothing is read: a code of another
	// conversation must never be served as this one's.
	conv := s.caller(ctx, "recall_folded", raw, meta)
	if conv == "" {
		return "recall_folded: " + UnknownCaller, true
	}
	_, convs, err := s.session(conv)
	if err != nil {
		return recall.Unavailable("the fold record cannot be read: " + err.Error()), true
	}
	stores := make([]recall.Store, len(convs))
	for i, c := range convs {
		stores[i] = c.RecallStore()
	}
	rep := recall.Answer(stores, recall.Request{Code: a.Code, Codes: a.Codes, Chars: a.Chars, Lines: a.Lines, Grep: a.Grep, Search: a.Search})
	return rep.Text, rep.IsError
}

// UnknownCaller answers a call whose conversation the store cannot tell.
const UnknownCaller = "context-fold could not tell which conversation this call comes from " +
	"(contextfold proxy noted no call like it, or two conversations made the same call at once), " +
	"and it never reads another conversation's folded blocks, so nothing was read. " +
	"Call it again; if it keeps failing, this client's requests are not going through contextfold proxy."

func (s store) unfold(ctx context.Context, raw, meta json.RawMessage) (string, bool) {
	var a struct {
		Code  string   `json:"code"`
		Codes []string `json:"codes"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return "unfold: bad arguments: " + err.Error(), true
	}
	joined := recall.JoinCodes(a.Code, a.Codes)
	if len(joined) == 0 {
		return recall.NoCodes, false
	}
	codes := make([]string, len(joined))
	for i, c := range joined {
		codes[i], _ = digest.ParseCode(c)
	}
	conv := s.caller(ctx, "unfold", raw, meta)
	if conv == "" {
		return "unfold: " + UnknownCaller, true
	}
	paths, convs, err := s.session(conv)
	if err != nil {
		return "unfold failed: the fold record cannot be read: " + err.Error(), true
	}
	stores := make([]*foldstore.RecallStore, len(convs))
	for k, c := range convs {
		stores[k] = c.RecallStore()
	}
	var u recall.Unfold
	byFile := map[string][]string{}
	var order []string
	for i, code := range codes {
		path, st := "", (*foldstore.RecallStore)(nil)
		var rec registry.Record
		for k, cs := range stores {
			if r, ok := cs.Lookup(code); ok && code != "" {
				path, st, rec = paths[k], cs, r
				break
			}
		}
		if st == nil {
			u.Missing = append(u.Missing, joined[i])
			continue
		}
		if st.Unfolded(rec.ID) {
			u.Already = append(u.Already, code)
			continue
		}
		if _, seen := byFile[path]; !seen {
			order = append(order, path)
		}
		byFile[path] = append(byFile[path], code)
		tool := rec.Tool
		if tool == "" {
			tool = rec.Kind
		}
		u.Expanded = append(u.Expanded, recall.Match{Code: code, Label: recall.StoreLabel(tool)})
	}
	for _, p := range order {
		if err := s.reader().RequestUnfold(p, byFile[p]); err != nil {
			return fmt.Sprintf("unfold failed: %v", err), true
		}
	}
	return recall.RenderUnfold(u), false
}
