package proxy

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/compact"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/proxy/codec"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// A client that compacts its own history sends its whole conversation once
// more with a prompt asking for a summary, then goes on in a conversation
// that starts from that summary, under the same session id. The proxy
// carries its conversation across: at the compaction request it records
// every tool output of the history that never folded (so each stays
// recallable byte for byte by code and by search) and renders an index of
// what is recallable (paths, commands, error lines, each with its code);
// the conversation that continues from the summary, in the same session,
// goes on in the same file, with the same engine (codes and fold events
// never restart), and gets the index appended to its summary message,
// the same bytes in every request.

// compactionPrompts start the prompt a client sends to have its history
// summarized.
var compactionPrompts = [][]byte{
	// Claude Code, appended to the last message (of tool results).
	[]byte("Your task is to create a detailed summary of the conversation so far"),
	// Codex (a provider of its own), a user message after the history,
	// in a request that declares no tools.
	[]byte("You are performing a CONTEXT CHECKPOINT COMPACTION"),
	// opencode, the history rendered as text in one user message, in a
	// request that declares no tools.
	[]byte("Create a new anchored summary from the conversation history"),
}

// compactionTrigger is the item Codex ends its history with to have the
// OpenAI provider compact it (remote compaction).
var compactionTrigger = []byte(`"type":"compaction_trigger"`)

// continuedMarkers start the summary a client's conversation continues
// from after it compacted.
var continuedMarkers = [][]byte{
	// Claude Code: the first user message.
	[]byte("This session is being continued from a previous conversation that ran out of context"),
	// Codex: a user message after its setup messages.
	[]byte("Another language model started to solve this problem and produced a summary"),
	// opencode: the user message after the summary (an assistant message)
	// and the turns it kept.
	[]byte("Continue if you have next steps, or stop and ask for clarification"),
}

// indexTitle heads the index appended to a client's summary.
const indexTitle = "Recallable from before this conversation was compacted"

// compactionRequest reports whether req asks the model to summarize the
// conversation: its last user message holds a compaction prompt.
func compactionRequest(req *codec.Request) bool {
	n := len(req.Messages)
	return promptAt(req) >= 0 || n > 0 && bytes.Contains(req.Messages[n-1], compactionTrigger)
}

// promptAt is the message of req that holds a compaction prompt, or -1.
func promptAt(req *codec.Request) int {
	from := len(req.Messages) - 2
	for _, p := range compactionPrompts {
		if i := req.FindText(p, from); i >= 0 {
			return i
		}
	}
	return -1
}

// continued returns the message of req that holds a client's summary (or,
// for opencode, follows it), or -1.
func continued(req *codec.Request) int {
	for _, m := range continuedMarkers {
		if i := req.FindText(m, 0); i >= 0 {
			return i
		}
	}
	return -1
}

// toollessCompaction records a compaction whose request declares no tools
// (Codex with a provider of its own, opencode): it goes out as the client
// sent it, and its conversation is the one its tool results name or,
// where it has none (opencode renders the history as text), the session's
// latest.
func (f *Folder) toollessCompaction(api codec.API, scope string, req *codec.Request) {
	list := string(api) + "\x00" + scope
	var c *conversation
	thread, named := threadOf(req, scope != "")
	switch {
	case named:
		var err error
		if c, err = f.conversation(api, scope, list, f.resolve(api, scope, scope+"\x00"+thread, req)); err != nil {
			f.log.Warn("client compaction: its conversation could not be opened; the outputs that never folded are not recorded", "err", err)
			return
		}
	case scope != "":
		f.mu.Lock()
		if l := f.scopes[list]; len(l) > 0 {
			c = l[0]
		}
		f.mu.Unlock()
	}
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || (named && c.compactedAt == len(req.Messages)) {
		return
	}
	tr := c.eng.Transcript()
	if named {
		tr = c.eng.Linearize(req.Messages)
	}
	f.compaction(c, tr, len(req.Messages), promptAt(req))
}

// compaction records, at a compaction request of c (of msgs messages,
// linearized as tr, message prompt holding the client's prompt, or -1),
// every tool output of the history that never folded,
// and the index the conversation that continues from the summary gets.
// c.mu is held.
func (f *Folder) compaction(c *conversation, tr *block.Transcript, msgs, prompt int) {
	c.compactedAt = msgs
	blocks := tr.Blocks()
	if prompt >= 0 {
		// The prompt is the client's, not the user's: not in the index.
		blocks = slices.DeleteFunc(slices.Clone(blocks), func(b block.Block) bool { return b.Msg == prompt })
	}
	ev, skipped := c.eng.Compaction(blocks)
	if len(skipped) > 0 {
		f.log.Warn("client compaction: some outputs collide with another's code and are not recallable", "blocks", len(skipped), "file", c.file.Path())
	}
	recorded := 0
	if ev != nil {
		err := c.file.Commit(ev, func(id string) (string, bool) {
			b, ok := tr.Lookup(id)
			if !ok {
				return "", false
			}
			return b.Text, true
		})
		if err != nil {
			c.eng.EnsureSeqAtLeast(ev.Seq)
			f.log.Warn("client compaction: the outputs that never folded could not be recorded; they are not recallable", "blocks", len(ev.Folds), "err", err, "file", c.file.Path())
		} else {
			c.eng.Replay([]engine.Entry{ev.Entry()})
			recorded = len(ev.Folds)
		}
	}
	codes := map[string]string{}
	for _, rec := range c.eng.Registry().All() {
		codes[rec.ID] = rec.Code
	}
	index := compact.Render(compact.Input{Title: indexTitle, Seq: c.compactions + 1, Blocks: blocks, Codes: codes, Carried: c.index})
	if err := c.file.RecordIndex(index); err != nil {
		f.log.Warn("client compaction: the index of what is recallable could not be recorded; the conversation goes on without it", "err", err, "file", c.file.Path())
	} else {
		c.index = index
		c.compactions++
	}
	f.mu.Lock()
	f.compacted[c.scope] = c.name
	f.mu.Unlock()
	f.log.Info("client compaction", "recorded", recorded, "recallable", len(codes), "file", c.file.Path())
}

// resolve returns the file of the conversation key of api in scope (the
// client's session): its own, or, for a conversation that continues from
// a client's compaction in the same session, the file of the conversation
// that compacted (an alias in the store says so from then on).
func (f *Folder) resolve(api codec.API, scope, key string, req *codec.Request) string {
	name := foldstore.FileName(string(api), key)
	list := string(api) + "\x00" + scope
	f.mu.Lock()
	if a, ok := f.aliases[name]; ok {
		name = a
	}
	_, held := f.convs[name]
	from := f.compacted[list]
	f.mu.Unlock()
	if held || scope == "" {
		return name
	}
	if target, ok := f.store.Alias(name); ok {
		f.mu.Lock()
		f.aliases[name] = target
		f.mu.Unlock()
		return target
	}
	if from == "" || from == name || continued(req) < 0 {
		return name
	}
	if err := f.store.SetAlias(name, from); err != nil {
		f.log.Warn("a conversation continued after the client's compaction starts afresh: its alias could not be recorded", "err", err)
		return name
	}
	f.mu.Lock()
	f.aliases[name] = from
	if f.compacted[list] == from {
		delete(f.compacted, list)
	}
	f.mu.Unlock()
	f.log.Info("conversation continues after the client's compaction", "file", from)
	return from
}

// withIndex adds to spans, when c holds an index and req starts from a
// client's summary, the index appended to that summary. c.mu is held.
func (c *conversation) withIndex(req *codec.Request, spans []codec.Span) []codec.Span {
	if c.index == "" {
		return spans
	}
	// The summary stays where it was found: look there before scanning
	// the whole conversation again.
	m := c.indexAt
	if m < 0 || m >= len(req.Messages) || !bytes.Equal(req.Messages[m], c.indexMsg) {
		m = continued(req)
		if m < 0 {
			return spans
		}
		c.indexAt, c.indexMsg = m, req.Messages[m]
	}
	sp, err := req.AppendSpan(m, c.index)
	if err != nil {
		return spans
	}
	i, _ := slices.BinarySearchFunc(spans, sp.Start, func(s codec.Span, at int) int { return cmp.Compare(s.Start, at) })
	if i > 0 && spans[i-1].End > sp.Start || i < len(spans) && spans[i].Start < sp.End {
		return spans // inside another edit
	}
	return slices.Insert(slices.Clip(spans), i, sp)
}

// firstAfterCompaction is the body to send for req, the first request of a
// conversation that continues from a client's compaction in scope, before
// any tool result names it: the summary with the index appended, as every
// later request of the conversation sends it (withIndex). ok is false for
// any other request.
func (f *Folder) firstAfterCompaction(api codec.API, scope string, req *codec.Request) (out [][]byte, ok bool) {
	if scope == "" {
		return nil, false
	}
	f.mu.Lock()
	c := f.convs[f.compacted[string(api)+"\x00"+scope]]
	f.mu.Unlock()
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	index := c.index
	c.mu.Unlock()
	m := continued(req)
	if index == "" || m < 0 {
		return nil, false
	}
	sp, err := req.AppendSpan(m, index)
	if err != nil {
		return nil, false
	}
	segs, _ := codec.Splice(req.Body(), []codec.Span{sp})
	return segs, true
}
