package fakellm

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The OpenAI Responses API (POST /v1/responses, Pi's "openai-responses"
// api), as Pi 1.6 speaks it: "input" is an array of items, "store" is false
// and, with thinking on, "include" asks for "reasoning.encrypted_content" so
// that reasoning survives the stateless replay.
//
// # Parsed view
//
// ParseResponses maps the items onto Message: a non-empty "instructions"
// becomes a leading Role "system" Message (Raw is its value); a message item
// of role "system" or "developer" becomes Role "system", of role "user"
// Role "user" (Content is its input_text parts, or a string content, as
// is); function_call_output (and custom_tool_call_output) items become Role
// "tool" with ToolCallID = call_id and Content = the output text (a string
// output as is, else its text parts concatenated). Each run of consecutive
// assistant output items (reasoning, assistant message, function_call,
// custom_tool_call) is one Role "assistant" Message: Content is its message
// texts concatenated, ToolCalls its calls (ID = call_id, Arguments = the
// text of the "arguments" string; a custom_tool_call's input becomes
// {"input": <input>}), and Raw is the span of the input array from the run's
// first item to its last (a single item's exact bytes; for several, the items
// with the commas between them). Other items (additional_tools,
// configuration_update, tool_search_*, item_reference) add no Message.
// MessagesJSON is the "input" value, which every Raw aliases.
//
// # Strict rules
//
// What the real API enforces on a replayed input, with where it is stated
// (real wording where a source shows it), and what this fake assumed:
//
//  1. Reasoning is produced only by reasoning models: model ids containing
//     "reasoning" or "preserved" (assumed naming). With "reasoning":
//     {"effort":"none"} (what Pi sends with thinking off) the model does not
//     reason; a missing "reasoning" means the default effort (assumed). A
//     reply's Thinking is dropped otherwise, so Recorded.Reply shows what was
//     sent. A reasoning item replayed to a non-reasoning model is a 400
//     (assumed wording; see openai/openai-python#2364).
//  2. Encrypted content. Each Reply.Thinking[i] is minted as reasoning item
//     rs_<seq>_<i> with summary [{"type":"summary_text","text":...}] (an
//     empty summary for text "" or a RedactedPrefix entry) and, when
//     "include" has "reasoning.encrypted_content", an encrypted_content
//     sealing its id, the model id, the summary texts and the prefix hash
//     (rule 6) under sign(). Streaming sends encrypted_content only in
//     response.output_item.done, as the reference says to use that event's
//     item (docs.rs openai-client-base ReasoningItem). On replay:
//     - no encrypted_content: 404 "Item with id 'rs_…' not found. Items are
//     not persisted when `store` is set to false. Try again with `store`
//     set to true, or remove this item from your input."
//     (can1357/oh-my-pi#41, anomalyco/opencode#8987); with store true the
//     fake still has nothing stored (assumed: the same 404, shorter text).
//     - content that does not decode or verify: 400 "The encrypted content
//     for item rs_… could not be verified. Reason: Encrypted content could
//     not be decrypted or parsed." (openai/codex#35334, #8145; the real
//     error's code "invalid_encrypted_content" cannot be sent, APIError has
//     no code field).
//     - content that verifies but whose id, summary or model differs from
//     the replayed item and request: the same 400 with another Reason
//     (assumed wording). For a preserved model (rule 6) a model mismatch
//     removes the item instead, reason "model_mismatch" (assumed name; Pi's
//     appendReasoningRemovals says GPT-6.2 removes reasoning "created under
//     another organization, end user, or model").
//  3. Following item. A reasoning item must be followed by an assistant
//     message or function call, else 400
//     "Item 'rs_…' of type 'reasoning' was provided without its required
//     following item." (continuedev/continue#8933, community.openai.com
//     t/1236046). Two reasoning items in a row fail too
//     (community.openai.com t/1280238), except (assumed) the items one
//     response minted together for several Reply.Thinking entries,
//     rs_<seq>_<i> then rs_<seq>_<i+1>. The response always ends in a
//     message item when the reply has no tool calls, as the real API does.
//  4. Pairing. A function_call fc_<seq>_<i> or message msg_<seq> that this
//     server minted in a response with reasoning is paired with that
//     response's last reasoning item. Replayed with its id, it must have
//     that reasoning item earlier in its own run of output items (nothing
//     but output items between them), else 400 "Item 'fc_…' of type
//     'function_call' was provided without its required 'reasoning' item:
//     'rs_…'." (mastra-ai/mastra#8738; for messages continuedev/continue#12620;
//     zirkelc.dev/posts/prune-openai-reasoning-models; interleaving outputs
//     between the calls of one response breaks it too, community.openai.com
//     t/1355347). An item without an id, or with an id this server did not
//     mint (another process, another model), is not pair-checked (assumed;
//     Pi omits the id for other models' calls to avoid this check).
//  5. Tool outputs. A function_call_output whose call_id no earlier
//     function_call has is a 400 "No tool call found for function call
//     output with call_id call_…." (continuedev/continue#10092); a
//     function_call without a later output a 400 "No tool output found for
//     function call call_…." (router-for-me/CLIProxyAPI#2368); a call
//     without call_id a 400 "Missing required parameter:
//     'input[k].call_id'." (assumed wording).
//  6. Preserved reasoning (model ids containing "preserved": a GPT-6.2-style
//     model that keeps earlier turns' reasoning). The encrypted content
//     binds the hash of everything before the item: instructions, tools and
//     every earlier input item (canonical JSON: sorted keys, no
//     insignificant whitespace), chained item by item; a reply's reasoning
//     items are bound to the request's input plus the reply's earlier
//     reasoning items, as Pi replays them. A replayed item whose prefix
//     changed is not an error: the API removes it and reports
//     {"type":"reasoning","id":"rs_…","action":"removed","reason":"prefix_mismatch"}
//     in the response's input_transformations (the field Pi reads in
//     appendReasoningRemovals; the entry shape is the openai gem's
//     Responses::Response::InputTransformation), recorded in
//     Recorded.Dropped. Assumed: the check is per item over the input as
//     sent (removed items included), so an edit removes every item minted
//     before it that follows it, while an item minted after the edit binds
//     the new prefix and is kept; a removal is reported again on every
//     request that replays the item (as Pi's comment says); the pairing
//     rule is judged before removals; removed items are still billed.
//  7. Non-preserved reasoning models do not bind the prefix (assumed:
//     earlier input may be edited freely). The real pre-GPT-5.6 models drop
//     earlier turns' reasoning and report it as reason "turn_boundary"; the
//     fake does not report those (Pi ignores them anyway).
//
// Rule order: items are checked in input order and the first violation is
// answered; missing tool outputs (rule 5) are checked after the last item.

// The Responses rule violations, as the real API words them.
const (
	respNoReasoningItem = "Item '%s' of type '%s' was provided without its required 'reasoning' item: '%s'."
	respNoFollowingItem = "Item '%s' of type 'reasoning' was provided without its required following item."
	respNotVerified     = "The encrypted content for item %s could not be verified. Reason: %s"
	respUndecryptable   = "Encrypted content could not be decrypted or parsed."
	respNotFoundNoStore = "Item with id '%s' not found. Items are not persisted when `store` is set to false. " +
		"Try again with `store` set to true, or remove this item from your input."
	respNotFound     = "Item with id '%s' not found."
	respNoToolCall   = "No tool call found for function call output with call_id %s."
	respNoToolOutput = "No tool output found for function call %s."
	respMissingParam = "Missing required parameter: 'input[%d].%s'."
	respNotReasoning = "Reasoning input items can only be provided to a reasoning model. " +
		"Remove reasoning items from your input and try again."
)

// respReasoningModel reports whether model is a reasoning model.
func respReasoningModel(model string) bool {
	return strings.Contains(model, "reasoning") || respPreservedModel(model)
}

// respPreservedModel reports whether model keeps earlier reasoning bound to
// its prefix (rule 6).
func respPreservedModel(model string) bool { return strings.Contains(model, "preserved") }

// respBody is the part of a Responses request the fake reads.
type respBody struct {
	Model           string            `json:"model"`
	Instructions    json.RawMessage   `json:"instructions"`
	Input           json.RawMessage   `json:"input"`
	Tools           []json.RawMessage `json:"tools"`
	Stream          bool              `json:"stream"`
	Store           *bool             `json:"store"`
	Include         []string          `json:"include"`
	MaxOutputTokens int               `json:"max_output_tokens"`
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
}

// reasons reports whether the request makes the model reason.
func (b *respBody) reasons() bool {
	return respReasoningModel(b.Model) && (b.Reasoning == nil || b.Reasoning.Effort != "none")
}

// includesEncrypted reports whether the request asks for encrypted reasoning.
func (b *respBody) includesEncrypted() bool {
	return slices.Contains(b.Include, "reasoning.encrypted_content")
}

// respItem is one input item.
type respItem struct {
	Type   string `json:"type"`
	Role   string `json:"role"`
	ID     string `json:"id"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Arguments is a JSON string on function_call items, but an object on
	// Codex's tool_search_call items ({"query","limit"}, the shape the API
	// streams for a client-executed tool_search and accepts replayed), so it
	// is kept raw: a *string would reject a valid tool-search replay.
	Arguments        json.RawMessage `json:"arguments"`
	Input            *string         `json:"input"`
	Content          json.RawMessage `json:"content"`
	Output           json.RawMessage `json:"output"`
	Summary          []respSummary   `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content"`
}

type respSummary struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// isMessage reports whether it is a message item (type "message" or none).
func (it *respItem) isMessage() bool { return it.Type == "" || it.Type == "message" }

// isCall reports whether it is a tool call item.
func (it *respItem) isCall() bool { return it.Type == "function_call" || it.Type == "custom_tool_call" }

// isOutput reports whether it is an assistant output item.
func (it *respItem) isOutput() bool {
	return it.Type == "reasoning" || it.isCall() || (it.isMessage() && it.Role == "assistant")
}

// respElem is one element of the input array and where it lies in it.
type respElem struct {
	raw        json.RawMessage
	start, end int
}

// respElements splits a JSON array into its elements, each aliasing arr.
func respElements(arr []byte) ([]respElem, error) {
	dec := json.NewDecoder(bytes.NewReader(arr))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, errors.New("not an array")
	}
	var out []respElem
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		out = append(out, respElem{raw: arr[start:end:end], start: start, end: end})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// respRequest is a decoded Responses request.
type respRequest struct {
	body  respBody
	input []byte // the input array; a string input is wrapped as one user message
	elems []respElem
	items []respItem
}

func decodeResponses(body []byte) (*respRequest, error) {
	r := &respRequest{}
	if err := json.Unmarshal(body, &r.body); err != nil {
		return nil, fmt.Errorf("fakellm: parse responses request: %w", err)
	}
	in := bytes.TrimSpace(r.body.Input)
	switch {
	case len(in) == 0 || bytes.Equal(in, []byte("null")):
		in = []byte("[]")
	case in[0] == '"':
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return nil, fmt.Errorf("fakellm: input: %w", err)
		}
		in, _ = json.Marshal([]any{map[string]any{"role": "user", "content": s}})
	}
	r.input = in
	elems, err := respElements(in)
	if err != nil {
		return nil, fmt.Errorf("fakellm: parse input: %w", err)
	}
	r.elems = elems
	r.items = make([]respItem, len(elems))
	for k, e := range elems {
		if err := json.Unmarshal(e.raw, &r.items[k]); err != nil {
			return nil, fmt.Errorf("fakellm: input[%d]: %w", k, err)
		}
	}
	return r, nil
}

// ParseResponses parses an OpenAI Responses API request body. See the
// "Parsed view" section above for how the items are mapped.
func ParseResponses(body []byte) (*Request, error) {
	r, err := decodeResponses(body)
	if err != nil {
		return nil, err
	}
	b := &r.body
	req := &Request{API: Responses, Body: body, Model: b.Model, Stream: b.Stream,
		MaxTokens: b.MaxOutputTokens, MessagesJSON: r.input}
	var key []byte
	for _, t := range b.Tools {
		key = append(key, t...)
	}
	key = append(append(key, b.Instructions...), r.input...)
	req.cacheKey = key

	if ins := bytes.TrimSpace(b.Instructions); len(ins) > 0 && !bytes.Equal(ins, []byte("null")) {
		text, err := contentText(ins)
		if err != nil {
			return nil, fmt.Errorf("fakellm: instructions: %w", err)
		}
		if text != "" {
			req.Messages = append(req.Messages, Message{Role: "system", Content: text, Raw: b.Instructions})
		}
	}
	var run *Message
	runStart, runEnd := 0, 0
	flush := func() {
		if run != nil {
			run.Raw = r.input[runStart:runEnd:runEnd]
			req.Messages = append(req.Messages, *run)
			run = nil
		}
	}
	for k := range r.items {
		it, e := &r.items[k], r.elems[k]
		if it.isOutput() {
			if run == nil {
				run, runStart = &Message{Role: "assistant"}, e.start
			}
			runEnd = e.end
			switch it.Type {
			case "function_call":
				args := ""
				if len(it.Arguments) > 0 && json.Unmarshal(it.Arguments, &args) != nil {
					return nil, fmt.Errorf("fakellm: input[%d]: function_call arguments must be a JSON string", k)
				}
				run.ToolCalls = append(run.ToolCalls, ToolCall{ID: it.CallID, Name: it.Name, Arguments: json.RawMessage(args)})
			case "custom_tool_call":
				in := ""
				if it.Input != nil {
					in = *it.Input
				}
				args, _ := json.Marshal(map[string]string{"input": in})
				run.ToolCalls = append(run.ToolCalls, ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
			case "reasoning":
			default:
				text, err := contentText(it.Content)
				if err != nil {
					return nil, fmt.Errorf("fakellm: input[%d]: %w", k, err)
				}
				run.Content += text
			}
			continue
		}
		flush()
		switch {
		case it.isMessage():
			role := it.Role
			if role == "developer" {
				role = "system"
			}
			text, err := contentText(it.Content)
			if err != nil {
				return nil, fmt.Errorf("fakellm: input[%d]: %w", k, err)
			}
			req.Messages = append(req.Messages, Message{Role: role, Content: text, Raw: e.raw})
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			text, err := contentText(it.Output)
			if err != nil {
				return nil, fmt.Errorf("fakellm: input[%d] output: %w", k, err)
			}
			req.Messages = append(req.Messages, Message{Role: "tool", Content: text, ToolCallID: it.CallID, Raw: e.raw})
		}
	}
	flush()
	for _, raw := range b.Tools {
		var t struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("fakellm: parse tool: %w", err)
		}
		name := t.Name
		if name == "" {
			name = t.Type
		}
		req.Tools = append(req.Tools, name)
	}
	return req, nil
}

// respCanon re-encodes JSON with sorted keys and without insignificant
// whitespace, so equal values hash equal however they were spelled.
func respCanon(raw []byte) []byte { return reencode(raw, nil) }

// respHead is the prefix hash before the first input item: instructions
// and tools.
func respHead(b *respBody) [32]byte {
	h := sha256.New()
	h.Write([]byte("fakellm responses prefix\x00"))
	if ins := bytes.TrimSpace(b.Instructions); len(ins) > 0 {
		h.Write(respCanon(ins))
	}
	h.Write([]byte{0})
	for _, t := range b.Tools {
		h.Write(respCanon(t))
		h.Write([]byte{0})
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// respSealed is what an encrypted_content carries.
type respSealed struct {
	ID      string   `json:"id"`
	Model   string   `json:"model"`
	Summary []string `json:"summary"`
	Prefix  string   `json:"prefix"`
	MAC     string   `json:"mac"`
}

func respMACParts(s *respSealed) [][]byte {
	parts := [][]byte{[]byte("responses reasoning"), []byte(s.ID), []byte(s.Model), []byte(s.Prefix)}
	for _, t := range s.Summary {
		parts = append(parts, []byte(t))
	}
	return parts
}

// respSeal mints an encrypted_content: URL-safe base64 of a 0x80 version
// byte (so it starts with "g", like the real Fernet tokens) and the sealed
// JSON.
func respSeal(id, model string, summary []string, prefix [32]byte) string {
	s := respSealed{ID: id, Model: model, Summary: summary, Prefix: hex.EncodeToString(prefix[:])}
	if s.Summary == nil {
		s.Summary = []string{}
	}
	s.MAC = sign(respMACParts(&s)...)
	b, _ := json.Marshal(s)
	return base64.URLEncoding.EncodeToString(append([]byte{0x80}, b...))
}

// respUnseal decodes and verifies an encrypted_content.
func respUnseal(enc string) (*respSealed, bool) {
	b, err := base64.URLEncoding.DecodeString(enc)
	if err != nil || len(b) < 2 || b[0] != 0x80 {
		return nil, false
	}
	var s respSealed
	if err := json.Unmarshal(b[1:], &s); err != nil {
		return nil, false
	}
	if !verify(s.MAC, respMACParts(&s)...) {
		return nil, false
	}
	return &s, true
}

// respSummaryTexts is the summary a Reply.Thinking entry is sent with: none
// for "" or a RedactedPrefix entry (a reasoning item without a summary).
func respSummaryTexts(thinking string) []string {
	if thinking == "" || strings.HasPrefix(thinking, RedactedPrefix) {
		return nil
	}
	return []string{thinking}
}

// Output item shapes, in the real API's key order.
type (
	respReasoningOut struct {
		ID               string        `json:"id"`
		Type             string        `json:"type"`
		Summary          []respSummary `json:"summary"`
		EncryptedContent string        `json:"encrypted_content,omitempty"`
	}
	respOutputText struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
	}
	respMessageOut struct {
		ID      string           `json:"id"`
		Type    string           `json:"type"`
		Status  string           `json:"status"`
		Role    string           `json:"role"`
		Content []respOutputText `json:"content"`
	}
	respSearchOut struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Status    string          `json:"status"`
		Execution string          `json:"execution"`
		CallID    string          `json:"call_id"`
		Arguments json.RawMessage `json:"arguments"`
	}
	respCallOut struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		Arguments string `json:"arguments"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	}
)

func respReasoningItem(id string, summary []string, enc string) respReasoningOut {
	it := respReasoningOut{ID: id, Type: "reasoning", Summary: []respSummary{}, EncryptedContent: enc}
	for _, t := range summary {
		it.Summary = append(it.Summary, respSummary{Type: "summary_text", Text: t})
	}
	return it
}

func respReasoningID(seq, i int) string { return fmt.Sprintf("rs_%d_%d", seq, i) }
func respCallID(seq, i int) string      { return fmt.Sprintf("fc_%d_%d", seq, i) }
func respMessageID(seq int) string      { return fmt.Sprintf("msg_%d", seq) }

// respHasMessage reports whether a reply is sent with a message item: when
// it has text, or nothing else to end the response with.
func respHasMessage(r Reply) bool { return r.Text != "" || len(r.ToolCalls) == 0 }

// respNextReasoning reports whether reasoning item b was minted right after
// a in the same response (rs_<seq>_<i>, rs_<seq>_<i+1>).
func respNextReasoning(a, b string) bool {
	ma, mb := respReasoningIDRE.FindStringSubmatch(a), respReasoningIDRE.FindStringSubmatch(b)
	if ma == nil || mb == nil || ma[1] != mb[1] {
		return false
	}
	i, _ := strconv.Atoi(ma[2])
	j, _ := strconv.Atoi(mb[2])
	return j == i+1
}

var (
	respReasoningIDRE = regexp.MustCompile(`^rs_(\d+)_(\d+)$`)
	respCallIDRE      = regexp.MustCompile(`^fc_(\d+)_(\d+)$`)
	respMessageIDRE   = regexp.MustCompile(`^msg_(\d+)$`)
)

// respPaired returns the reasoning item a replayed call or message minted by
// this server is paired with (rule 4), or "".
func (s *Server) respPaired(it *respItem) string {
	var seq, idx int
	if m := respCallIDRE.FindStringSubmatch(it.ID); m != nil && it.isCall() {
		seq, _ = strconv.Atoi(m[1])
		idx, _ = strconv.Atoi(m[2])
	} else if m := respMessageIDRE.FindStringSubmatch(it.ID); m != nil && it.isMessage() {
		seq, _ = strconv.Atoi(m[1])
		idx = -1
	} else {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq < 1 || seq > len(s.reqs) {
		return ""
	}
	rec := &s.reqs[seq-1]
	if rec.Seq != seq || rec.API != Responses || rec.Status != http.StatusOK || len(rec.Signatures) == 0 {
		return ""
	}
	if idx >= 0 {
		if idx >= len(rec.Reply.ToolCalls) || rec.Reply.ToolCalls[idx].ID != it.CallID {
			return ""
		}
	} else if !respHasMessage(rec.Reply) {
		return ""
	}
	return respReasoningID(seq, len(rec.Signatures)-1)
}

func respBad(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}

func (s *Server) checkResponses(req *Request, rec *Recorded) *APIError {
	r, err := decodeResponses(req.Body)
	if err != nil {
		return respBad("%s", err.Error())
	}
	b := &r.body
	preserved := respPreservedModel(b.Model)
	h := respHead(b)
	seenCalls := map[string]bool{}
	answered := map[string]bool{}
	var calls []string
	runStart := -1
	for k := range r.items {
		it := &r.items[k]
		prefix := h
		h = chain(h, respCanon(r.elems[k].raw))
		if !it.isOutput() {
			runStart = -1
		} else if runStart < 0 {
			runStart = k
		}
		switch {
		case it.Type == "reasoning":
			if !respReasoningModel(b.Model) {
				return respBad(respNotReasoning)
			}
			if it.EncryptedContent == nil || *it.EncryptedContent == "" {
				if b.Store != nil && !*b.Store {
					return &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Message: fmt.Sprintf(respNotFoundNoStore, it.ID)}
				}
				return &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Message: fmt.Sprintf(respNotFound, it.ID)}
			}
			sealed, ok := respUnseal(*it.EncryptedContent)
			if !ok {
				return respBad(respNotVerified, it.ID, respUndecryptable)
			}
			if sealed.ID != it.ID {
				return respBad(respNotVerified, it.ID, "The encrypted content belongs to another item.")
			}
			var summary []string
			for _, p := range it.Summary {
				summary = append(summary, p.Text)
			}
			if !slices.Equal(summary, sealed.Summary) {
				return respBad(respNotVerified, it.ID, "The summary does not match the encrypted content.")
			}
			j := k + 1
			for j < len(r.items) && r.items[j].Type == "reasoning" && respNextReasoning(r.items[j-1].ID, r.items[j].ID) {
				j++
			}
			if j == len(r.items) || !r.items[j].isOutput() || r.items[j].Type == "reasoning" {
				return respBad(respNoFollowingItem, it.ID)
			}
			switch {
			case sealed.Model != b.Model && preserved:
				rec.Dropped = append(rec.Dropped, Transformation{Type: "reasoning", ID: it.ID, Action: "removed", Reason: "model_mismatch"})
			case sealed.Model != b.Model:
				return respBad(respNotVerified, it.ID, "The encrypted content was created by another model.")
			case preserved && sealed.Prefix != hex.EncodeToString(prefix[:]):
				rec.Dropped = append(rec.Dropped, Transformation{Type: "reasoning", ID: it.ID, Action: "removed", Reason: "prefix_mismatch"})
			}
		case it.isCall() || (it.isMessage() && it.Role == "assistant"):
			if it.isCall() {
				if it.CallID == "" {
					return respBad(respMissingParam, k, "call_id")
				}
				if !seenCalls[it.CallID] {
					calls = append(calls, it.CallID)
				}
				seenCalls[it.CallID] = true
			}
			if it.ID == "" {
				continue
			}
			if rs := s.respPaired(it); rs != "" {
				found := false
				for j := runStart; j < k && !found; j++ {
					found = r.items[j].Type == "reasoning" && r.items[j].ID == rs
				}
				if !found {
					typ := it.Type
					if typ == "" {
						typ = "message"
					}
					return respBad(respNoReasoningItem, it.ID, typ, rs)
				}
			}
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			if !seenCalls[it.CallID] {
				return respBad(respNoToolCall, it.CallID)
			}
			answered[it.CallID] = true
		}
	}
	for _, id := range calls {
		if !answered[id] {
			return respBad(respNoToolOutput, id)
		}
	}
	return nil
}

// mintResponses mints the reply's reasoning items: one per Thinking entry,
// its encrypted content bound to the request's input and the reply's
// earlier reasoning items (rule 6). rec.Signatures holds each item's
// encrypted_content ("" when the request did not include it).
func (s *Server) mintResponses(req *Request, rec *Recorded) {
	rec.Signatures = nil
	r, err := decodeResponses(req.Body)
	if err != nil {
		return
	}
	if !r.body.reasons() {
		rec.Reply.Thinking = nil
		return
	}
	h := respHead(&r.body)
	for _, e := range r.elems {
		h = chain(h, respCanon(e.raw))
	}
	include := r.body.includesEncrypted()
	for i, t := range rec.Reply.Thinking {
		id := respReasoningID(req.Seq, i)
		summary := respSummaryTexts(t)
		enc := ""
		if include {
			enc = respSeal(id, req.Model, summary, h)
		}
		rec.Signatures = append(rec.Signatures, enc)
		item, _ := json.Marshal(respReasoningItem(id, summary, enc))
		h = chain(h, respCanon(item))
	}
}

// respOutput returns the response's output items in order: reasoning, the
// message, the function calls.
func respOutput(rec *Recorded) []any {
	r := rec.Reply
	var out []any
	for i, t := range r.Thinking {
		enc := ""
		if i < len(rec.Signatures) {
			enc = rec.Signatures[i]
		}
		out = append(out, respReasoningItem(respReasoningID(rec.Seq, i), respSummaryTexts(t), enc))
	}
	if respHasMessage(r) {
		out = append(out, respMessageOut{ID: respMessageID(rec.Seq), Type: "message", Status: "completed", Role: "assistant",
			Content: []respOutputText{{Type: "output_text", Text: r.Text, Annotations: []any{}}}})
	}
	for i, tc := range r.ToolCalls {
		if tc.Name == ToolSearchCall {
			out = append(out, respSearchOut{ID: respCallID(rec.Seq, i), Type: "tool_search_call", Status: "completed",
				Execution: "client", CallID: tc.ID, Arguments: tc.Arguments})
			continue
		}
		out = append(out, respCallOut{ID: respCallID(rec.Seq, i), Type: "function_call", Status: "completed",
			Arguments: string(tc.Arguments), CallID: tc.ID, Name: tc.Name, Namespace: tc.Namespace})
	}
	return out
}

// ToolSearchCall names, in a Reply on the Responses route, a client-run
// tool search (Codex's tool_search): the call goes out as a
// tool_search_call item whose arguments are the object {"query","limit"}.
const ToolSearchCall = "tool_search"

// respUsage is the usage object. Computed usage adds the reasoning tokens
// (the thinking text, bytes/4) to the output tokens, which include them on
// this API; a scripted Usage is reported as given.
func respUsage(rec *Recorded) map[string]any {
	u := rec.Usage
	think := 0
	for _, t := range rec.Reply.Thinking {
		think += len(t)
	}
	reasoning := think / 4
	if think > 0 {
		reasoning = max(reasoning, 1)
	}
	output := u.Completion
	if rec.Reply.Usage.IsZero() {
		output += reasoning
	} else {
		reasoning = min(reasoning, output)
	}
	return map[string]any{
		"input_tokens":          u.Prompt,
		"input_tokens_details":  map[string]any{"cached_tokens": u.Cached},
		"output_tokens":         output,
		"output_tokens_details": map[string]any{"reasoning_tokens": reasoning},
		"total_tokens":          u.Prompt + output,
	}
}

// respResponse is the response object with the given status and output.
func (e encoder) respResponse(rec *Recorded, status string, output []any, usage map[string]any) map[string]any {
	if output == nil {
		output = []any{}
	}
	resp := map[string]any{
		"id": fmt.Sprintf("resp_%d", e.seq), "object": "response", "created_at": e.created,
		"status": status, "model": e.model, "output": output, "usage": usage,
	}
	if usage == nil {
		resp["usage"] = nil
	}
	if status == "incomplete" {
		resp["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	}
	if status != "in_progress" && len(rec.Dropped) > 0 {
		resp["input_transformations"] = rec.Dropped
	}
	return resp
}

// responsesStream writes a Responses event stream, or the response object
// for a non-streaming request: response.created and response.in_progress;
// per reasoning item output_item.added (without encrypted_content),
// reasoning_summary_part.added, reasoning_summary_text.delta pieces and
// .done, reasoning_summary_part.done, output_item.done (the full item); the
// message item with content_part.added, output_text.delta pieces and .done,
// content_part.done, output_item.done; per function call output_item.added,
// function_call_arguments.delta pieces and .done, output_item.done; then
// response.completed (response.incomplete for finish reason "length") with
// the usage and any input_transformations.
func (e encoder) responsesStream(w http.ResponseWriter, rec *Recorded) {
	items := respOutput(rec)
	status := "completed"
	final := "response.completed"
	if rec.Reply.FinishReason == "length" {
		status, final = "incomplete", "response.incomplete"
	}
	if !rec.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(e.respResponse(rec, status, items, respUsage(rec)))
		return
	}
	out := newSSE(w)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		out.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": e.respResponse(rec, "in_progress", nil, nil)})
	ev("response.in_progress", map[string]any{"response": e.respResponse(rec, "in_progress", nil, nil)})
	for idx, item := range items {
		switch it := item.(type) {
		case respReasoningOut:
			added := it
			added.Summary, added.EncryptedContent = []respSummary{}, ""
			ev("response.output_item.added", map[string]any{"output_index": idx, "item": added})
			for si, part := range it.Summary {
				base := func() map[string]any {
					return map[string]any{"item_id": it.ID, "output_index": idx, "summary_index": si}
				}
				f := base()
				f["part"] = respSummary{Type: "summary_text", Text: ""}
				ev("response.reasoning_summary_part.added", f)
				for _, p := range pieces(part.Text, e.chunk) {
					f := base()
					f["delta"] = p
					ev("response.reasoning_summary_text.delta", f)
				}
				f = base()
				f["text"] = part.Text
				ev("response.reasoning_summary_text.done", f)
				f = base()
				f["part"] = part
				ev("response.reasoning_summary_part.done", f)
			}
			ev("response.output_item.done", map[string]any{"output_index": idx, "item": it})
		case respMessageOut:
			added := it
			added.Status, added.Content = "in_progress", []respOutputText{}
			ev("response.output_item.added", map[string]any{"output_index": idx, "item": added})
			base := func() map[string]any {
				return map[string]any{"item_id": it.ID, "output_index": idx, "content_index": 0}
			}
			f := base()
			f["part"] = respOutputText{Type: "output_text", Text: "", Annotations: []any{}}
			ev("response.content_part.added", f)
			text := it.Content[0].Text
			for _, p := range pieces(text, e.chunk) {
				f := base()
				f["delta"] = p
				f["logprobs"] = []any{}
				ev("response.output_text.delta", f)
			}
			f = base()
			f["text"] = text
			f["logprobs"] = []any{}
			ev("response.output_text.done", f)
			f = base()
			f["part"] = it.Content[0]
			ev("response.content_part.done", f)
			ev("response.output_item.done", map[string]any{"output_index": idx, "item": it})
		case respSearchOut:
			ev("response.output_item.added", map[string]any{"output_index": idx, "item": it})
			ev("response.output_item.done", map[string]any{"output_index": idx, "item": it})
		case respCallOut:
			added := it
			added.Status, added.Arguments = "in_progress", ""
			ev("response.output_item.added", map[string]any{"output_index": idx, "item": added})
			for _, p := range pieces(it.Arguments, e.chunk) {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": idx, "delta": p})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": idx, "arguments": it.Arguments})
			ev("response.output_item.done", map[string]any{"output_index": idx, "item": it})
		}
	}
	ev(final, map[string]any{"response": e.respResponse(rec, status, items, respUsage(rec))})
}
