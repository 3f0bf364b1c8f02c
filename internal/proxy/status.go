package proxy

import (
	"slices"
	"strings"
	"time"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/wire"
	"github.com/contextfold/contextfold/internal/proxy/codec"
)

// ConversationStatus is what a conversation's last request showed: how
// large it was, what the proxy planned for, what it folded and what it
// holds back and why. GET /contextfold/status lists them.
type ConversationStatus struct {
	File  string `json:"file"`
	API   string `json:"api"`
	Model string `json:"model"`
	// Requests counts the requests the proxy folded in this process.
	Requests int `json:"requests"`
	// Tokens is the last request as sent, all of it (system, tools,
	// messages), as estimated; Window and Budget are what the proxy
	// planned it against.
	Tokens int `json:"tokens"`
	Window int `json:"window"`
	Budget int `json:"budget"`
	// Reserve is the room the client keeps free: it compacts its history
	// once a request reaches Window − Reserve. WindowFrom says where the
	// window came from (the -window flag, the client's setting, the
	// model); Client names the client, by its headers.
	Reserve    int    `json:"reserve,omitempty"`
	WindowFrom string `json:"windowFrom"`
	Client     string `json:"client,omitempty"`
	// Events is the conversation's last fold event's number, Folded the
	// blocks folded now.
	Events int `json:"events"`
	Folded int `json:"folded"`
	// DropBlock: the proxy asks the provider to drop the thinking a fold
	// invalidates (a Claude that binds thinking to its prefix).
	DropBlock bool `json:"dropBlock,omitempty"`
	// ThinkingFolded and ThinkingDropped add up the events' cost in
	// thinking: blocks folded into digests, and blocks the provider
	// drops (the current tool-use cycle's, the least an event can cost).
	ThinkingFolded  int `json:"thinkingFolded,omitempty"`
	ThinkingDropped int `json:"thinkingDropped,omitempty"`
	// Held says why the next fold waits, when it does.
	Held string `json:"held,omitempty"`
	// Note is the schedule's own word on the request.
	Note    string    `json:"note,omitempty"`
	Updated time.Time `json:"updated"`
}

// heldReason is why a fold waits for a user turn.
const heldReason = "the model rejects thinking whose prefix changed and the client does not ask it to drop such thinking; folds wait for the next user message"

// note records what req's step showed in c's status and logs what
// changed: a fold event with its cost in thinking, a fold held back, held
// folds let go. c.mu is held.
func (f *Folder) note(c *conversation, req *codec.Request, res engine.Result, model wire.Model, binds bool) {
	st := &c.status
	st.File, st.API, st.Model = c.file.Path(), string(req.API), req.Model
	st.Requests++
	st.DropBlock = binds
	st.Budget, st.Note = res.Status.Budget, res.Status.Note
	st.Updated = time.Now()
	if ev := res.Event; ev != nil {
		st.ThinkingFolded += ev.Thinking.Folded
		st.ThinkingDropped += ev.Thinking.Dropped
		attrs := []any{"seq", ev.Seq, "trigger", string(ev.Trigger), "blocks", len(ev.Folds), "file", st.File}
		if !ev.Thinking.IsZero() {
			attrs = append(attrs, "thinking_invalidated", ev.Thinking.Invalidated, "thinking_folded", ev.Thinking.Folded, "thinking_dropped", ev.Thinking.Dropped)
		}
		f.log.Info("fold event", attrs...)
	}
	switch {
	case res.Held && st.Held == "":
		why := heldReason
		if f.HoldThinking && !model.MidConvoEffort {
			why = "the model rejects thinking whose prefix changed and the proxy runs with -drop-block=false; folds wait for the next user message"
		}
		st.Held = why
		f.log.Info("fold held", "why", why, "model", req.Model, "file", st.File)
	case !res.Held && st.Held != "" && res.Event != nil:
		st.Held = ""
		f.log.Info("held folds released", "seq", res.Event.Seq, "file", st.File)
	case !res.Held && res.Event == nil && st.Held != "":
		// Nothing to fold any more (an unfold, a shrunk conversation).
		st.Held = ""
	}
}

// Status returns the status of every conversation held in memory, most
// recently used first.
func (f *Folder) Status() []ConversationStatus {
	f.mu.Lock()
	convs := make([]*conversation, 0, len(f.convs))
	for _, c := range f.convs {
		convs = append(convs, c)
	}
	f.mu.Unlock()
	out := make([]ConversationStatus, 0, len(convs))
	for _, c := range convs {
		c.mu.Lock()
		if !c.closed && c.status.Requests > 0 {
			st := c.status
			st.Events = c.eng.LastSeq()
			st.Folded, _, _ = c.eng.Folded()
			out = append(out, st)
		}
		c.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b ConversationStatus) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(a.File, b.File)
	})
	return out
}
