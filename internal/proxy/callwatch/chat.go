package callwatch

import (
	"bytes"
	"encoding/json"
	"slices"
)

// chatState gathers the tool-call pieces of a Chat Completions stream, in
// the order the calls started.
type chatState struct {
	calls []chatCall
}

type chatCall struct {
	choice, index int
	id, name      string
	// decided is set once the name is known; until then pieces are kept in
	// case the tool is wanted.
	decided, wanted bool
	args            []byte // `"` then the arguments pieces, still escaped
	over            bool   // args went over MaxArgs
}

type chatFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

var (
	toolCalls       = []needle{newNeedle(`"tool_calls"`)}
	needleToolCalls = toolCalls[0].s
	needleID        = []byte(`"id"`)
	doneData        = []byte("[DONE]")
)

func (w *Watcher) chatEvent(data []byte) {
	c := &w.chat
	if bytes.Equal(data, doneData) {
		w.chatFinish(-1)
		return
	}
	if w.onUsage != nil && w.chatUsage(data) {
		return
	}
	if !c.matters(data) {
		return
	}
	var chunk struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				ToolCalls []struct {
					Index    int          `json:"index"`
					ID       string       `json:"id"`
					Function chatFunction `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &chunk) != nil {
		return
	}
	for _, ch := range chunk.Choices {
		for _, tc := range ch.Delta.ToolCalls {
			w.chatPiece(ch.Index, tc.Index, tc.ID, tc.Function)
		}
		// Pieces of the chunk come first: some servers send the last
		// arguments and the finish_reason together.
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			w.chatFinish(ch.Index)
		}
	}
}

// toolCallsOrUsage finds tool calls or a usage object in one scan.
var toolCallsOrUsage = append(slices.Clip(toolCalls), usageNeedles[Chat]...)

// chatUsage reads the usage of a chunk and reports whether the chunk is
// done with: with no call in progress, a chunk without tool calls or
// usage is, after one scan for both.
func (w *Watcher) chatUsage(data []byte) bool {
	if len(w.chat.calls) > 0 {
		w.usageData(data) // rare: a call is streaming
		return false
	}
	switch which(data, toolCallsOrUsage) {
	case -1:
		return true
	case 0:
		w.usageData(data) // tool calls first; usage may follow
		return false
	}
	w.readUsage(data)
	return !hasAny(data, toolCalls)
}

// matters reports whether a chunk can change what is reported, so that the
// others skip JSON parsing. With no call in progress only a chunk with
// tool_calls can; while every call in progress is of an unwanted tool only
// one that starts a call, with an "id" inside its tool_calls (a chunk's own
// id comes before its choices). The needles are JSON string tokens, which
// never match inside escaped text.
func (c *chatState) matters(data []byte) bool {
	if len(c.calls) == 0 {
		return hasAny(data, toolCalls)
	}
	if c.live() {
		return true
	}
	i := bytes.Index(data, needleToolCalls)
	return i >= 0 && bytes.Contains(data[i:], needleID)
}

// live reports whether a call in progress is wanted or not yet named.
func (c *chatState) live() bool {
	for i := range c.calls {
		if !c.calls[i].decided || c.calls[i].wanted {
			return true
		}
	}
	return false
}

// chatPiece adds one tool_calls element to the call it continues.
func (w *Watcher) chatPiece(choice, index int, id string, fn chatFunction) {
	c := &w.chat
	var cc *chatCall
	for i := len(c.calls) - 1; i >= 0; i-- {
		if c.calls[i].choice == choice && c.calls[i].index == index {
			cc = &c.calls[i]
			break
		}
	}
	if len(id) > maxName || len(fn.Name) > maxName {
		return // not a real call; holding it would let the stream grow us
	}
	// A call starts with the piece that carries its id; a piece without one
	// continues the call at its index. A different id at the same index is
	// a new call: some servers number every call 0 (or send no index).
	if id != "" && (cc == nil || id != cc.id) {
		if len(c.calls) >= maxPending {
			return
		}
		c.calls = append(c.calls, chatCall{choice: choice, index: index, id: id, args: []byte{'"'}})
		cc = &c.calls[len(c.calls)-1]
	}
	if cc == nil {
		return
	}
	// The name comes whole in the call's first piece; later pieces repeat
	// it at most.
	if !cc.decided && fn.Name != "" {
		cc.name, cc.decided = fn.Name, true
		cc.wanted = w.want(fn.Name)
		if !cc.wanted {
			w.release(cc.args)
			cc.args = nil
		}
	}
	if cc.decided && !cc.wanted {
		return
	}
	if piece, ok := strContents(fn.Arguments); ok {
		w.addArgs(&cc.args, &cc.over, piece)
	}
}

// chatFinish reports the calls of choice (every choice for -1), which are
// complete, and forgets them.
func (w *Watcher) chatFinish(choice int) {
	c := &w.chat
	calls := c.calls // report may close w, which clears c
	for i := range calls {
		cc := &calls[i]
		if choice >= 0 && cc.choice != choice {
			continue
		}
		if !cc.wanted || cc.over {
			continue
		}
		if args, ok := unquote(append(cc.args, '"')); ok {
			w.report(Call{ID: cc.id, Name: cc.name, Args: args})
		}
	}
	c.calls = slices.DeleteFunc(c.calls, func(cc chatCall) bool {
		if choice < 0 || cc.choice == choice {
			w.release(cc.args)
			return true
		}
		return false
	})
}

// chatBody reports the calls of a non-streaming chat.completion.
func (w *Watcher) chatBody(b []byte) {
	if !hasAny(b, toolCalls) {
		return
	}
	var resp struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID       string        `json:"id"`
					Function *chatFunction `json:"function"`
					Custom   *struct {
						Name  string          `json:"name"`
						Input json.RawMessage `json:"input"`
					} `json:"custom"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(b, &resp) != nil {
		return
	}
	for _, ch := range resp.Choices {
		for _, tc := range ch.Message.ToolCalls {
			var name string
			var raw json.RawMessage
			switch {
			case tc.Function != nil:
				name, raw = tc.Function.Name, tc.Function.Arguments
			case tc.Custom != nil:
				name, raw = tc.Custom.Name, tc.Custom.Input
			default:
				continue
			}
			if tc.ID == "" || len(tc.ID) > maxName || len(name) > maxName || !w.want(name) {
				continue
			}
			if args, ok := argsText(raw); ok {
				w.report(Call{ID: tc.ID, Name: name, Args: args})
			}
		}
	}
}
