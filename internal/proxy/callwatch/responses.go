package callwatch

import (
	"encoding/json"
	"slices"
)

// respState remembers the calls already reported, since a call shows up
// both in its response.output_item.done and in the final response.
type respState struct {
	seen map[string]bool
}

// respItem is an output item of the Responses API.
type respItem struct {
	Type        string          `json:"type"`
	ID          string          `json:"id"`
	CallID      string          `json:"call_id"`
	Name        string          `json:"name"`
	Namespace   string          `json:"namespace"`
	ServerLabel string          `json:"server_label"`
	Status      string          `json:"status"`
	Arguments   json.RawMessage `json:"arguments"`
	Input       json.RawMessage `json:"input"`
}

// callItem finds the events that may hold a call item: the many delta
// events skip JSON parsing.
var callItem = []needle{newNeedle(`"function_call"`), newNeedle(`"custom_tool_call"`), newNeedle(`"mcp_call"`)}

// callOrUsage finds a call item or a usage object in one scan.
var callOrUsage = append(slices.Clip(callItem), usageNeedles[Responses]...)

func (w *Watcher) respEvent(data []byte) {
	if w.onUsage == nil {
		if !hasAny(data, callItem) {
			return
		}
	} else {
		// The final response holds the usage, and the calls too.
		switch which(data, callOrUsage) {
		case -1:
			return
		case len(callItem):
			w.readUsage(data)
			if !hasAny(data, callItem) {
				return
			}
		default:
			w.usageData(data)
		}
	}
	var ev struct {
		Type     string    `json:"type"`
		Item     *respItem `json:"item"`
		Response *struct {
			Output []respItem `json:"output"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch ev.Type {
	case "response.output_item.done":
		if ev.Item != nil {
			w.respItem(ev.Item)
		}
	case "response.completed", "response.incomplete":
		if ev.Response != nil {
			for i := range ev.Response.Output {
				w.respItem(&ev.Response.Output[i])
			}
		}
	}
}

// respItem reports it if it is a finished call of a wanted tool, once.
func (w *Watcher) respItem(it *respItem) {
	call := Call{ID: it.CallID, Name: it.Name, Namespace: it.Namespace}
	raw := it.Arguments
	switch it.Type {
	case "function_call":
	case "custom_tool_call":
		raw = it.Input
	case "mcp_call":
		// The provider runs a remote MCP call itself; its id is the item's.
		call.ID, call.Namespace = it.ID, it.ServerLabel
	default:
		return
	}
	// An item cut short (status "incomplete") does not run.
	if call.ID == "" || len(call.ID) > maxName || len(call.Name) > maxName ||
		(it.Status != "" && it.Status != "completed") || !w.want(call.Name) {
		return
	}
	r := &w.resp
	if r.seen[call.ID] || len(r.seen) >= maxPending {
		return
	}
	args, ok := argsText(raw)
	if !ok {
		return
	}
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[call.ID] = true
	call.Args = args
	w.report(call)
}

// respBody reports the calls of a non-streaming response object.
func (w *Watcher) respBody(b []byte) {
	if !hasAny(b, callItem) {
		return
	}
	var resp struct {
		Output []respItem `json:"output"`
	}
	if json.Unmarshal(b, &resp) != nil {
		return
	}
	for i := range resp.Output {
		w.respItem(&resp.Output[i])
	}
}
