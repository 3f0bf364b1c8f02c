package codec

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// Each decoder below is handed one conversation item that rawjson.ValueEnd
// validated whole (Request.conversation), so it splits the item's parts
// with the OfValid splitters, which do not validate them again and skip
// a long string (a tool's output) many bytes at a time.

// message decodes one Anthropic Messages message at body offset off.
func (d *decoder) message(raw []byte, off int) {
	ms, err := rawjson.ObjectOfValid(raw)
	if err != nil {
		d.r.add(unknownMsg(raw), -1, -1)
		return
	}
	content, _ := rawjson.Get(ms, "content")
	switch str(ms, "role") {
	case "system":
		text, _ := textParts(content, "text")
		d.r.add(systemMsg(text), -1, -1)
	case "assistant":
		d.noteAfterResults = false
		d.assistant(ms, off)
	case "user":
		if rawjson.IsString(content) {
			s, _ := rawjson.Unquote(content)
			d.userText(s)
			return
		}
		cm, ok := only(ms, "content")
		blocks, starts, err := rawjson.ArraySpansOfValid(cm.Value)
		if !ok || err != nil {
			d.r.add(unknownMsg(raw), -1, -1)
			return
		}
		var rest []string
		results := false
		for j, b := range blocks {
			bm, err := rawjson.ObjectOfValid(b)
			if err != nil || str(bm, "type") != "tool_result" {
				rest = append(rest, blockText(b, bm, err))
				continue
			}
			results = true
			d.toolResult(bm, off+cm.Start+starts[j], "content", str(bm, "tool_use_id"), rawjson.Bool(getRaw(bm, "is_error")), "text")
		}
		if results {
			d.noteAfterResults = true
		}
		if len(rest) > 0 {
			d.userText(strings.Join(rest, "\n"))
		}
	default:
		d.r.add(unknownMsg(raw), -1, -1)
	}
}

// userText adds a user message's text: a user turn, or a note when it rides
// along with tool results (see decoder.noteAfterResults).
func (d *decoder) userText(s string) {
	if d.noteAfterResults {
		d.r.add(noteMsg(s), -1, -1)
		return
	}
	d.r.add(userMsg(s), -1, -1)
}

// assistant adds an assistant message (at body offset off). Its parts are
// its content blocks, one each. When it holds thinking, it gets an anchor,
// so that its thinking has durable ids: the id of its first tool_use, else
// a hash of its first signature (both unique to the response that made
// them). A signed thinking block may fold (into a text block, unsigned, as
// Pi sends folded thinking); a redacted one never does.
func (d *decoder) assistant(ms []rawjson.Member, off int) {
	var parts [][]byte
	var spans [][2]int
	anchor, sig, thinking := "", "", false
	if cm, ok := only(ms, "content"); ok && rawjson.IsString(cm.Value) {
		s, _ := rawjson.Unquote(cm.Value)
		parts = append(parts, textPart(s))
	} else if blocks, starts, err := rawjson.ArraySpansOfValid(cm.Value); ok && err == nil {
		for j, b := range blocks {
			part, foldable := d.anthropicPart(b)
			parts = append(parts, part)
			sp := [2]int{-1, -1}
			bm, _ := rawjson.ObjectOfValid(b)
			switch typ := str(bm, "type"); {
			case typ == "tool_use" && anchor == "":
				anchor = str(bm, "id")
			case typ == "thinking" || typ == "redacted_thinking":
				thinking = true
				if sig == "" {
					sig = str(bm, "signature") + str(bm, "data")
				}
				if foldable {
					at := off + cm.Start + starts[j]
					sp = [2]int{at, at + len(b)}
				}
			}
			spans = append(spans, sp)
		}
	}
	if !thinking {
		d.r.add(assistantMsg(Messages, parts, d.r.built, ""), -1, -1)
		return
	}
	if anchor == "" && sig != "" {
		h := sha256.Sum256([]byte(sig))
		anchor = "sig-" + hex.EncodeToString(h[:12])
	}
	if anchor == "" {
		spans = nil
	}
	d.r.addParts(assistantMsg(Messages, parts, d.r.built, anchor), -1, -1, spans)
}

// anthropicPart is one assistant content block as a Pi part; foldable says
// a thinking block may be replaced whole.
func (d *decoder) anthropicPart(b []byte) (part []byte, foldable bool) {
	bm, err := rawjson.ObjectOfValid(b)
	if err != nil {
		return textPart(string(b)), false
	}
	switch str(bm, "type") {
	case "text":
		return textPart(str(bm, "text")), false
	case "thinking":
		text, sig := str(bm, "thinking"), str(bm, "signature")
		_, cached := rawjson.Get(bm, "cache_control")
		return signedThinkingPart(text, sig != ""), text != "" && !cached && unique(bm)
	case "redacted_thinking":
		return redactedThinkingPart(), false
	case "tool_use", "server_tool_use", "mcp_tool_use":
		id, name := str(bm, "id"), str(bm, "name")
		d.setName(id, name)
		args, ok := rawjson.Get(bm, "input")
		if !ok {
			args = []byte("{}")
		}
		return toolCallPart(id, name, args), false
	}
	return textPart(string(b)), false
}

// unique reports whether no member name repeats: with duplicates, parsers
// disagree on which one counts, so such a block is never replaced.
func unique(ms []rawjson.Member) bool {
	for i := range ms {
		for j := i + 1; j < len(ms); j++ {
			if ms[i].Key == ms[j].Key {
				return false
			}
		}
	}
	return true
}

// blockText is what a non-tool-result block of a user message counts as.
func blockText(raw []byte, bm []rawjson.Member, err error) string {
	if err == nil && str(bm, "type") == "text" {
		return str(bm, "text")
	}
	return string(raw)
}

func getRaw(ms []rawjson.Member, key string) []byte {
	v, _ := rawjson.Get(ms, key)
	return v
}

// toolResult adds the tool result held in object bm (at body offset off),
// whose output is member key.
func (d *decoder) toolResult(bm []rawjson.Member, off int, key, callID string, isError bool, textTypes ...string) {
	out, ok := only(bm, key)
	if !ok {
		v, _ := rawjson.Get(bm, key)
		text, _ := textParts(v, textTypes...)
		d.r.add(toolResultMsg(callID, d.names.get(callID), text, isError, true), -1, -1)
		return
	}
	start, end := -1, -1
	if rawjson.IsString(out.Value) && utf8.Valid(out.Value) {
		// One string, the usual output: its literal is the message's text
		// (a long output is not unquoted and quoted again).
		if callID != "" {
			start, end = off+out.Start, off+out.End
		}
		d.r.add(toolResultLit(callID, d.names.get(callID), out.Value, isError, start < 0), start, end)
		return
	}
	text, opaque := textParts(out.Value, textTypes...)
	if !opaque && callID != "" {
		start, end = off+out.Start, off+out.End
	}
	d.r.add(toolResultMsg(callID, d.names.get(callID), text, isError, opaque || start < 0), start, end)
}

// item decodes one Responses input item at body offset off.
func (d *decoder) item(raw []byte, off int) {
	ms, err := rawjson.ObjectOfValid(raw)
	if err != nil {
		d.flush()
		d.r.add(unknownMsg(raw), -1, -1)
		return
	}
	typ := str(ms, "type")
	if typ == "" && str(ms, "role") != "" {
		typ = "message" // the short form {role, content}
	}
	switch typ {
	case "message":
		content, _ := rawjson.Get(ms, "content")
		text, _ := textParts(content, "input_text", "output_text", "text", "refusal")
		switch str(ms, "role") {
		case "assistant":
			d.parts = append(d.parts, textPart(text))
		case "user":
			d.flush()
			d.r.add(userMsg(text), -1, -1)
		default: // developer, system
			d.flush()
			d.r.add(systemMsg(text), -1, -1)
		}
	case "reasoning":
		sum, _ := rawjson.Get(ms, "summary")
		text, _ := textParts(sum, "summary_text")
		// Opaque to the model whatever its summary says: never folds. When
		// encrypted, it is bound like signed thinking (counted as such).
		d.parts = append(d.parts, opaqueThinkingPart(text, str(ms, "encrypted_content") != ""))
	case "function_call":
		id, name := str(ms, "call_id"), str(ms, "name")
		d.setName(id, name)
		d.parts = append(d.parts, toolCallPart(id, name, argsValue(str(ms, "arguments"))))
	case "custom_tool_call":
		id, name := str(ms, "call_id"), str(ms, "name")
		d.setName(id, name)
		d.parts = append(d.parts, toolCallPart(id, name, rawjson.Quote(nil, str(ms, "input"))))
	case "function_call_output", "custom_tool_call_output":
		d.flush()
		d.toolResult(ms, off, "output", str(ms, "call_id"), false, "input_text", "output_text")
	default:
		if strings.HasSuffix(typ, "_call") {
			// A model-side item (web search, local shell, tool search):
			// part of the assistant's turn, never folded.
			d.parts = append(d.parts, textPart(string(raw)))
			return
		}
		d.flush()
		d.r.add(unknownMsg(raw), -1, -1)
	}
}

// flush ends the pending assistant message of Responses items.
func (d *decoder) flush() {
	if len(d.parts) > 0 {
		d.r.add(assistantMsg(Responses, d.parts, d.r.built, ""), -1, -1)
		d.parts = nil
	}
}

// chat decodes one Chat Completions message at body offset off.
func (d *decoder) chat(raw []byte, off int) {
	ms, err := rawjson.ObjectOfValid(raw)
	if err != nil {
		d.r.add(unknownMsg(raw), -1, -1)
		return
	}
	content, _ := rawjson.Get(ms, "content")
	switch str(ms, "role") {
	case "system", "developer":
		text, _ := textParts(content, "text")
		d.r.add(systemMsg(text), -1, -1)
	case "user":
		text, _ := textParts(content, "text")
		d.r.add(userMsg(text), -1, -1)
	case "assistant":
		var parts [][]byte
		if r := str(ms, "reasoning_content"); r != "" {
			parts = append(parts, opaqueThinkingPart(r, false))
		}
		if text, _ := textParts(content, "text", "refusal"); text != "" {
			parts = append(parts, textPart(text))
		}
		if tcs, err := rawjson.ArrayOfValid(getRaw(ms, "tool_calls")); err == nil {
			for _, tc := range tcs {
				tm, err := rawjson.ObjectOfValid(tc)
				if err != nil {
					continue
				}
				fm, _ := rawjson.ObjectOfValid(getRaw(tm, "function"))
				id, name := str(tm, "id"), str(fm, "name")
				d.setName(id, name)
				parts = append(parts, toolCallPart(id, name, argsValue(str(fm, "arguments"))))
			}
		}
		d.r.add(assistantMsg(Chat, parts, d.r.built, ""), -1, -1)
	case "tool":
		d.toolResult(ms, off, "content", str(ms, "tool_call_id"), false, "text")
	default:
		d.r.add(unknownMsg(raw), -1, -1)
	}
}
