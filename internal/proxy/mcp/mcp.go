// Package mcp is context-fold's MCP server: the recall_folded and unfold
// tools, for clients that reach context-fold through the proxy (Claude Code,
// Codex, opencode), over the MCP stdio transport.
//
// The transport is JSON-RPC 2.0, one message per line on stdin and stdout
// (the MCP stdio transport; no batches, as MCP 2025-06-18 removed them). The
// server answers initialize, ping, tools/list and tools/call, ignores
// notifications, and answers every other request with "method not found",
// which is what makes Claude Code fall back from its server/discover probe
// to initialize.
package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// Instructions tell the model, in the client's system prompt, what the
// tools are for and how to reach them when the client defers MCP tools
// behind its tool search (Claude Code's ToolSearch, Codex's tool_search):
// a digest names recall_folded, which the model then finds among the
// deferred tools by that name.
const Instructions = "Tool outputs the context no longer holds whole appear as digests tagged {#code FOLDED}. " +
	"recall_folded reads one back byte for byte: {\"codes\":[\"code\"]}, with grep or lines to read part of it; " +
	"{\"search\":\"term\"} finds which folded blocks hold a term. unfold {\"codes\":[\"code\"]} puts a block back in the context. " +
	"If these tools are deferred (listed by name only), load recall_folded and unfold with your tool search first " +
	"(ToolSearch with select:<their full names>, or tool_search with the query recall_folded)."

// Versions are the MCP protocol versions the server speaks, newest first.
var Versions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeNotFound       = -32601
	codeInvalidParams  = -32602
)

// maxMessage bounds one incoming message.
const maxMessage = 16 << 20

// Tool is one tool the server offers.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// Call answers a call with the text the model reads; meta is the
	// call's _meta (the client's own fields, e.g. the model's call id).
	Call func(ctx context.Context, args, meta json.RawMessage) (text string, isError bool) `json:"-"`
}

// Server serves tools.
type Server struct {
	Name, Version string
	Tools         []Tool
	Log           *slog.Logger
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// Serve answers the messages read from r on w until r ends or ctx is done.
// Calls are answered in order.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxMessage)
	bw := bufio.NewWriter(w)
	for sc.Scan() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		res := s.handle(ctx, line, log)
		if res == nil {
			continue // a notification
		}
		// Encoded as JSON.stringify would: a recalled text holding a lone
		// surrogate (half an emoji) goes out as the \uXXXX escape it came
		// in as, where encoding/json would write U+FFFD.
		b, err := rawjson.Marshal(res)
		if err != nil {
			return fmt.Errorf("mcp: encode: %w", err)
		}
		bw.Write(b)
		bw.WriteByte('\n')
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("mcp: write: %w", err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("mcp: read: %w", err)
	}
	return nil
}

func errorResponse(id json.RawMessage, code int, msg string) *response {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return &response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}}
}

// handle answers one message; nil for a notification.
func (s *Server) handle(ctx context.Context, line []byte, log *slog.Logger) *response {
	if line[0] == '[' {
		return errorResponse(nil, codeInvalidRequest, "batches are not supported")
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return errorResponse(nil, codeParse, "parse error: "+err.Error())
	}
	if m.JSONRPC != "2.0" || m.Method == "" {
		if len(m.ID) == 0 && m.Method == "" {
			return nil // a response to nothing we sent: ignored
		}
		return errorResponse(m.ID, codeInvalidRequest, "not a JSON-RPC 2.0 request")
	}
	if len(m.ID) == 0 || string(m.ID) == "null" {
		log.Debug("notification", "method", m.Method)
		return nil
	}
	ok := func(v any) *response { return &response{JSONRPC: "2.0", ID: m.ID, Result: v} }
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(m.Params, &p)
		v := Versions[0]
		if slices.Contains(Versions, p.ProtocolVersion) {
			v = p.ProtocolVersion
		}
		return ok(map[string]any{
			"protocolVersion": v,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
			"serverInfo":      map[string]any{"name": s.Name, "version": s.Version},
			"instructions":    Instructions,
		})
	case "ping":
		return ok(map[string]any{})
	case "tools/list":
		return ok(map[string]any{"tools": s.Tools})
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return errorResponse(m.ID, codeInvalidParams, "tools/call: "+err.Error())
		}
		for _, t := range s.Tools {
			if t.Name == p.Name {
				text, isErr := t.Call(ctx, p.Arguments, p.Meta)
				log.Debug("tool call", "tool", p.Name, "error", isErr)
				return ok(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": isErr})
			}
		}
		return errorResponse(m.ID, codeInvalidParams, "unknown tool "+p.Name)
	}
	return errorResponse(m.ID, codeNotFound, "method not found: "+m.Method)
}
