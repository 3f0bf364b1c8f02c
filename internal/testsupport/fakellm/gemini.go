package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The strict Gemini generateContent rules, as the thought-signatures
// documentation (ai.google.dev/gemini-api/docs/thought-signatures) states
// them, and what the fake assumed where it is silent:
//
//  1. Where signatures are minted. A response's first functionCall part
//     carries a thoughtSignature ("the first function call part ... will
//     have a thought signature"); with no function call, the last part does.
//     Thought parts (thought: true) carry one too. A signature binds the
//     content of the part it was minted for: its text, or the call's name,
//     arguments and id.
//  2. The current turn. "Strict validation is enforced for all function
//     calls within the current turn": since the most recent user content
//     with standard content (text), the first functionCall part of each
//     model step must come back with its signature, else a 400
//     INVALID_ARGUMENT: "Function call `<name>` in the `<i>.` content block
//     is missing a `thought_signature`." The dummy signatures the
//     documentation names skip this check. The fake enforces it for its
//     thinking models (ids containing "thinking"), which are the ones that
//     mint signatures.
//  3. Assumed, to be strict: a thoughtSignature on a part whose content is
//     not what it was minted for (the text changed, or the signature moved
//     to another part) is a 400 "Corrupted thought signature." (the
//     documentation only says not to merge or move signatures; gateways
//     report this error). A thought part without a signature is accepted,
//     as the documentation says unsigned non-call parts are not enforced.
//  4. Function responses. The user content after a model step answers each
//     of its calls ("the number of function response parts is equal to the
//     number of function call parts"), else a 400.

// Dummy signatures the documentation lets a client use for calls it
// injected itself.
var geminiSkip = map[string]bool{"skip_thought_signature_validator": true, "context_engineering_is_the_way_to_go": true}

type gemPart struct {
	Text             *string `json:"text,omitempty"`
	Thought          bool    `json:"thought,omitempty"`
	ThoughtSignature string  `json:"thoughtSignature,omitempty"`
	FunctionCall     *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
		ID   string          `json:"id"`
	} `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
		ID       string          `json:"id"`
	} `json:"functionResponse,omitempty"`
}

type gemContent struct {
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

type gemBody struct {
	Contents          []gemContent `json:"contents"`
	SystemInstruction *gemContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig *struct {
		ThinkingConfig *struct {
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
}

// GeminiModel returns the model id of a .../models/{model}:method path.
func GeminiModel(path string) string {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return ""
	}
	m, _, _ := strings.Cut(path[i+len("/models/"):], ":")
	return m
}

// ParseGemini parses a generateContent request body: systemInstruction
// becomes a "system" Message, user text a "user" Message, each
// functionResponse a "tool" Message (ToolCallID is its id, else its name),
// and a model content an "assistant" Message with its non-thought text and
// its function calls.
func ParseGemini(body []byte) (*Request, error) {
	var b gemBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("fakellm: parse gemini request: %w", err)
	}
	var raw struct {
		Contents json.RawMessage `json:"contents"`
	}
	json.Unmarshal(body, &raw)
	req := &Request{API: Gemini, Body: body, MessagesJSON: raw.Contents, Stream: true}
	var key []byte
	if b.SystemInstruction != nil {
		var text strings.Builder
		for _, p := range b.SystemInstruction.Parts {
			var gp gemPart
			json.Unmarshal(p, &gp)
			if gp.Text != nil {
				text.WriteString(*gp.Text)
			}
		}
		sys, _ := json.Marshal(b.SystemInstruction)
		key = append(key, sys...)
		req.Messages = append(req.Messages, Message{Role: "system", Content: text.String(), Raw: sys})
	}
	for _, t := range b.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, f.Name)
		}
	}
	key = append(key, raw.Contents...)
	req.cacheKey = key
	for i, c := range b.Contents {
		cr, _ := json.Marshal(c)
		switch c.Role {
		case "user":
			var text strings.Builder
			hasText := false
			for _, p := range c.Parts {
				var gp gemPart
				if err := json.Unmarshal(p, &gp); err != nil {
					return nil, fmt.Errorf("fakellm: contents %d: %w", i, err)
				}
				switch {
				case gp.FunctionResponse != nil:
					id := gp.FunctionResponse.ID
					if id == "" {
						id = gp.FunctionResponse.Name
					}
					var resp struct {
						Output json.RawMessage `json:"output"`
						Error  json.RawMessage `json:"error"`
					}
					json.Unmarshal(gp.FunctionResponse.Response, &resp)
					out := resp.Output
					if len(out) == 0 {
						out = resp.Error
					}
					var s string
					if json.Unmarshal(out, &s) != nil {
						s = string(out)
					}
					req.Messages = append(req.Messages, Message{Role: "tool", Content: s, ToolCallID: id, Raw: p})
				case gp.Text != nil:
					text.WriteString(*gp.Text)
					hasText = true
				}
			}
			if hasText {
				req.Messages = append(req.Messages, Message{Role: "user", Content: text.String(), Raw: cr})
			}
		case "model":
			m := Message{Role: "assistant", Raw: cr}
			for _, p := range c.Parts {
				var gp gemPart
				if err := json.Unmarshal(p, &gp); err != nil {
					return nil, fmt.Errorf("fakellm: contents %d: %w", i, err)
				}
				switch {
				case gp.FunctionCall != nil:
					args := gp.FunctionCall.Args
					if len(args) == 0 {
						args = json.RawMessage("{}")
					}
					id := gp.FunctionCall.ID
					if id == "" {
						id = gp.FunctionCall.Name
					}
					m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: gp.FunctionCall.Name, Arguments: args})
				case gp.Text != nil && !gp.Thought:
					m.Content += *gp.Text
				}
			}
			req.Messages = append(req.Messages, m)
		default:
			return nil, fmt.Errorf("fakellm: contents %d: unknown role %q", i, c.Role)
		}
	}
	return req, nil
}

func geminiThinking(req *Request) bool {
	var b gemBody
	json.Unmarshal(req.Body, &b)
	return b.GenerationConfig != nil && b.GenerationConfig.ThinkingConfig != nil && b.GenerationConfig.ThinkingConfig.IncludeThoughts
}

// geminiSigns reports whether model mints thought signatures.
func geminiSigns(model string) bool { return strings.Contains(model, "thinking") }

func gemThoughtSig(model, text string) string {
	return sign([]byte("gemini thought"), []byte(model), []byte(text))
}

func gemTextSig(model, text string) string {
	return sign([]byte("gemini text"), []byte(model), []byte(text))
}

func gemCallSig(model, name string, args []byte, id string) string {
	return sign([]byte("gemini call"), []byte(model), []byte(name), canonical(args), []byte(id))
}

func (s *Server) checkGemini(req *Request, rec *Recorded) *APIError {
	var b gemBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return &APIError{Status: http.StatusBadRequest, Message: "Invalid JSON payload received."}
	}
	bad := func(format string, a ...any) *APIError {
		return &APIError{Status: http.StatusBadRequest, Type: "INVALID_ARGUMENT", Message: fmt.Sprintf(format, a...)}
	}
	model := req.Model
	turn := -1 // the current turn starts after the last user content with text
	for i, c := range b.Contents {
		if c.Role != "user" {
			continue
		}
		for _, p := range c.Parts {
			var gp gemPart
			json.Unmarshal(p, &gp)
			if gp.Text != nil {
				turn = i
			}
		}
	}
	var calls []string // ids of the previous model step's calls
	for i, c := range b.Contents {
		firstCall := true
		var answered []string
		for j, p := range c.Parts {
			var gp gemPart
			json.Unmarshal(p, &gp)
			sig := gp.ThoughtSignature
			if c.Role == "model" && sig != "" && !geminiSkip[sig] {
				var want string
				switch {
				case gp.FunctionCall != nil:
					want = gemCallSig(model, gp.FunctionCall.Name, gp.FunctionCall.Args, gp.FunctionCall.ID)
				case gp.Text != nil && gp.Thought:
					want = gemThoughtSig(model, *gp.Text)
				case gp.Text != nil:
					want = gemTextSig(model, *gp.Text)
				}
				if sig != want {
					return bad("Corrupted thought signature. (contents[%d].parts[%d])", i, j)
				}
			}
			if c.Role == "model" && gp.FunctionCall != nil {
				if firstCall && i > turn && geminiSigns(model) && sig == "" {
					return bad("Function call `%s` in the `%d.` content block is missing a `thought_signature`.", gp.FunctionCall.Name, i)
				}
				firstCall = false
			}
			if c.Role == "user" && gp.FunctionResponse != nil {
				answered = append(answered, gp.FunctionResponse.ID)
			}
		}
		if c.Role == "user" && len(calls) > 0 && len(answered) != len(calls) {
			return bad("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
		}
		calls = nil
		if c.Role == "model" {
			for _, p := range c.Parts {
				var gp gemPart
				json.Unmarshal(p, &gp)
				if gp.FunctionCall != nil {
					calls = append(calls, gp.FunctionCall.ID)
				}
			}
		}
	}
	return nil
}

// mintGemini signs the reply's parts: each thought part, and the first
// function call (or, with none, the text). A model without thinking
// enabled does not think.
func (s *Server) mintGemini(req *Request, rec *Recorded) {
	if !geminiThinking(req) {
		rec.Reply.Thinking = nil
	}
	rec.Signatures = rec.Signatures[:0]
	if !geminiSigns(req.Model) {
		return
	}
	for _, t := range rec.Reply.Thinking {
		rec.Signatures = append(rec.Signatures, gemThoughtSig(req.Model, t))
	}
	switch {
	case len(rec.Reply.ToolCalls) > 0:
		tc := rec.Reply.ToolCalls[0]
		rec.Signatures = append(rec.Signatures, gemCallSig(req.Model, tc.Name, tc.Arguments, tc.ID))
	case rec.Reply.Text != "":
		rec.Signatures = append(rec.Signatures, gemTextSig(req.Model, rec.Reply.Text))
	}
}

// geminiParts renders a reply as Gemini parts, with the minted signatures.
func geminiParts(rec *Recorded) []map[string]any {
	r := rec.Reply
	sig := func(k int) string {
		if k < len(rec.Signatures) {
			return rec.Signatures[k]
		}
		return ""
	}
	var parts []map[string]any
	for i, t := range r.Thinking {
		p := map[string]any{"text": t, "thought": true}
		if s := sig(i); s != "" {
			p["thoughtSignature"] = s
		}
		parts = append(parts, p)
	}
	k := len(r.Thinking)
	if r.Text != "" {
		p := map[string]any{"text": r.Text}
		if len(r.ToolCalls) == 0 && sig(k) != "" {
			p["thoughtSignature"] = sig(k)
		}
		parts = append(parts, p)
	}
	for i, tc := range r.ToolCalls {
		p := map[string]any{"functionCall": map[string]any{"name": tc.Name, "args": json.RawMessage(tc.Arguments), "id": tc.ID}}
		if i == 0 && sig(k) != "" {
			p["thoughtSignature"] = sig(k)
		}
		parts = append(parts, p)
	}
	return parts
}

func geminiUsage(rec *Recorded) map[string]any {
	u := rec.Usage
	thoughts := 0
	for _, t := range rec.Reply.Thinking {
		thoughts += len(t) / 4
	}
	return map[string]any{"promptTokenCount": u.Prompt, "cachedContentTokenCount": u.Cached,
		"candidatesTokenCount": u.Completion, "thoughtsTokenCount": thoughts, "totalTokenCount": u.Prompt + u.Completion + thoughts}
}

func geminiFinish(r Reply) string {
	if r.FinishReason == "length" {
		return "MAX_TOKENS"
	}
	return "STOP"
}

// geminiStream writes a streamGenerateContent answer (alt=sse): one chunk
// per part, each thought's text in pieces with its signature on the last
// piece, then a last chunk with the finish reason and usage. A
// :generateContent request gets one JSON response.
func (e encoder) geminiStream(w http.ResponseWriter, rec *Recorded) {
	parts := geminiParts(rec)
	id := fmt.Sprintf("resp_%d", e.seq)
	if !rec.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": geminiFinish(rec.Reply), "index": 0}},
			"usageMetadata": geminiUsage(rec), "modelVersion": e.model, "responseId": id})
		return
	}
	out := newSSE(w)
	chunk := func(ps []map[string]any, last bool) {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": ps}, "index": 0}
		m := map[string]any{"candidates": []any{c}, "modelVersion": e.model, "responseId": id}
		if last {
			c["finishReason"] = geminiFinish(rec.Reply)
			m["usageMetadata"] = geminiUsage(rec)
		}
		out.event("", m)
	}
	for _, p := range parts {
		text, isText := p["text"].(string)
		if !isText {
			chunk([]map[string]any{p}, false)
			continue
		}
		ps := pieces(text, e.chunk)
		for i, piece := range ps {
			q := map[string]any{"text": piece}
			if p["thought"] == true {
				q["thought"] = true
			}
			if s, ok := p["thoughtSignature"]; ok && i == len(ps)-1 {
				q["thoughtSignature"] = s
			}
			chunk([]map[string]any{q}, false)
		}
	}
	chunk([]map[string]any{}, true)
}
