package callwatch

import (
	"encoding/json"
	"slices"
)

// msgState follows the wanted tool blocks of an Anthropic stream that have
// started and not stopped.
type msgState struct {
	open []msgBlock
}

type msgBlock struct {
	index  int
	call   Call
	input  json.RawMessage // content_block.input, used when no delta came
	args   []byte          // `"` then the partial_json pieces, still escaped
	deltas bool
	over   bool // args went over MaxArgs
}

// msgBlockJSON is a content block, streamed or in a message's content.
type msgBlockJSON struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	ServerName string          `json:"server_name"`
	Input      json.RawMessage `json:"input"`
}

func (b *msgBlockJSON) isCall() bool { return b.Type == "tool_use" || b.Type == "mcp_tool_use" }

// valid reports whether the block has an id and no id or name too long to
// be real, which a Watcher would otherwise hold.
func (b *msgBlockJSON) valid() bool {
	return b.ID != "" && len(b.ID) <= maxName && len(b.Name) <= maxName && len(b.ServerName) <= maxName
}

var (
	blockStart = []needle{newNeedle(`"content_block_start"`)}
	toolUse    = []needle{newNeedle(`"tool_use"`), newNeedle(`"mcp_tool_use"`)}
	// blockOrUsage finds a block's start or a usage object in one scan.
	blockOrUsage = append(slices.Clip(blockStart), usageNeedles[Messages]...)
)

func (w *Watcher) msgEvent(data []byte) {
	m := &w.msg
	// With no wanted block open only the start of a tool block can matter,
	// and the usage of message_start and message_delta: the events of
	// text, thinking and unwanted tools skip JSON parsing, which the proxy
	// would otherwise do before passing them on.
	if len(m.open) == 0 {
		ns := blockStart
		if w.onUsage != nil {
			ns = blockOrUsage
		}
		switch which(data, ns) {
		case -1:
			return
		case 1:
			w.readUsage(data)
			return // no block starts in a usage event, and none is open
		}
		if !hasAny(data, toolUse) {
			return
		}
	} else {
		w.usageData(data)
	}
	var ev struct {
		Type         string        `json:"type"`
		Index        int           `json:"index"`
		ContentBlock *msgBlockJSON `json:"content_block"`
		Delta        *struct {
			Type        string          `json:"type"`
			PartialJSON json.RawMessage `json:"partial_json"`
		} `json:"delta"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch ev.Type {
	case "message_start":
		// A new message: blocks left open never finished.
		for _, b := range m.open {
			w.release(b.args)
		}
		m.open = m.open[:0]
	case "content_block_start":
		w.msgDrop(ev.Index)
		cb := ev.ContentBlock
		if cb == nil || !cb.isCall() || !cb.valid() || len(m.open) >= maxPending || !w.want(cb.Name) {
			return
		}
		m.open = append(m.open, msgBlock{index: ev.Index,
			call:  Call{ID: cb.ID, Name: cb.Name, Namespace: cb.ServerName},
			input: cb.Input, args: []byte{'"'}})
	case "content_block_delta":
		b := m.find(ev.Index)
		if b == nil || ev.Delta == nil || ev.Delta.Type != "input_json_delta" {
			return
		}
		if piece, ok := strContents(ev.Delta.PartialJSON); ok {
			b.deltas = true
			w.addArgs(&b.args, &b.over, piece)
		}
	case "content_block_stop":
		b := m.find(ev.Index)
		if b == nil {
			return
		}
		call, ok := b.call, !b.over
		if ok && b.deltas {
			call.Args, ok = unquote(append(b.args, '"'))
		} else if ok {
			call.Args, ok = argsText(b.input)
		}
		w.msgDrop(ev.Index)
		if ok {
			w.report(call)
		}
	}
}

func (m *msgState) find(index int) *msgBlock {
	for i := range m.open {
		if m.open[i].index == index {
			return &m.open[i]
		}
	}
	return nil
}

// msgDrop forgets the open block at index, if any.
func (w *Watcher) msgDrop(index int) {
	w.msg.open = slices.DeleteFunc(w.msg.open, func(b msgBlock) bool {
		if b.index == index {
			w.release(b.args)
			return true
		}
		return false
	})
}

// msgBody reports the tool calls of a non-streaming Messages response.
func (w *Watcher) msgBody(b []byte) {
	if !hasAny(b, toolUse) {
		return
	}
	var msg struct {
		Content []msgBlockJSON `json:"content"`
	}
	if json.Unmarshal(b, &msg) != nil {
		return
	}
	for _, cb := range msg.Content {
		if !cb.isCall() || !cb.valid() || !w.want(cb.Name) {
			continue
		}
		if args, ok := argsText(cb.Input); ok {
			w.report(Call{ID: cb.ID, Name: cb.Name, Namespace: cb.ServerName, Args: args})
		}
	}
}
