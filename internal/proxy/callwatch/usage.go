package callwatch

import (
	"bytes"
	"encoding/json"
)

// Usage is the token usage a response reports, in one shape for the three
// formats: Input is the prompt tokens neither read from nor written to the
// cache, so Input + CacheRead + CacheWrite is the whole prompt.
//
//   - Messages: message_start's message.usage, then message_delta's usage
//     (cumulative: a count it carries replaces the one before);
//     input_tokens, cache_read_input_tokens, cache_creation_input_tokens,
//     output_tokens. A JSON body: its usage.
//   - Responses: the final response's usage (response.completed, or
//     response.incomplete / response.failed): input_tokens, of which
//     input_tokens_details.cached_tokens were read from the cache,
//     output_tokens.
//   - Chat: the chunk with usage, which a stream carries only when the
//     client asked for it (stream_options.include_usage): prompt_tokens,
//     of which prompt_tokens_details.cached_tokens were read from the
//     cache, completion_tokens.
type Usage struct {
	Input, CacheRead, CacheWrite, Output int
}

// OnUsage has w call f once, at Close, with the usage the body reported,
// if it reported any. Set it before the first Write.
func (w *Watcher) OnUsage(f func(Usage)) { w.onUsage = f }

// usageState is the usage seen so far.
type usageState struct {
	u    Usage
	seen bool
}

// A usage object holds this key, which the events without one skip
// parsing for (inside text it would be escaped).
var usageNeedles = [...][]needle{
	Messages:  {newNeedle(`"output_tokens"`)},
	Responses: {newNeedle(`"input_tokens"`)},
	Chat:      {newNeedle(`"prompt_tokens"`)},
}

// usageKey is how a usage member begins.
var usageKey = []byte(`"usage":`)

// usageValue returns the value of the last "usage" member of an event,
// decoded alone: Responses' last event holds the whole response, which
// need not be parsed for it. Each format writes an event's own usage
// after whatever else it holds, and text cannot hold the key unescaped.
func usageValue(data []byte) (json.RawMessage, bool) {
	i := bytes.LastIndex(data, usageKey)
	if i < 0 {
		return nil, false
	}
	var raw json.RawMessage
	if json.NewDecoder(bytes.NewReader(data[i+len(usageKey):])).Decode(&raw) != nil {
		return nil, false
	}
	return raw, true
}

// anthropicUsage is a Messages usage object; a nil count is absent.
type anthropicUsage struct {
	Input      *int `json:"input_tokens"`
	CacheRead  *int `json:"cache_read_input_tokens"`
	CacheWrite *int `json:"cache_creation_input_tokens"`
	Output     *int `json:"output_tokens"`
}

// openAIUsage is a Responses or Chat usage object.
type openAIUsage struct {
	Input        *int `json:"input_tokens"`
	Output       *int `json:"output_tokens"`
	InputDetails struct {
		Cached int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	Prompt        *int `json:"prompt_tokens"`
	Completion    *int `json:"completion_tokens"`
	PromptDetails struct {
		Cached int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// usageData reads the usage an event (or a JSON body) reports, if any.
func (w *Watcher) usageData(data []byte) {
	if w.onUsage != nil && hasAny(data, usageNeedles[w.format]) {
		w.readUsage(data)
	}
}

// readUsage reads the usage of data, which a scan found a usage needle in.
func (w *Watcher) readUsage(data []byte) {
	var raw json.RawMessage
	if w.stream {
		var ok bool
		if raw, ok = usageValue(data); !ok {
			return
		}
	} else {
		// A body is parsed once: all of it, to take its own usage.
		var body struct {
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(data, &body) != nil || body.Usage == nil {
			return
		}
		raw = body.Usage
	}
	if w.format == Messages {
		var u anthropicUsage
		if json.Unmarshal(raw, &u) == nil {
			w.anthropicUsage(&u)
		}
		return
	}
	var u *openAIUsage
	if json.Unmarshal(raw, &u) == nil {
		w.openAIUsage(u)
	}
}

func (w *Watcher) anthropicUsage(u *anthropicUsage) {
	if u == nil {
		return
	}
	s := &w.usage
	for _, f := range []struct {
		v   *int
		out *int
	}{{u.Input, &s.u.Input}, {u.CacheRead, &s.u.CacheRead}, {u.CacheWrite, &s.u.CacheWrite}, {u.Output, &s.u.Output}} {
		if f.v != nil && *f.v >= 0 {
			*f.out, s.seen = *f.v, true
		}
	}
}

func (w *Watcher) openAIUsage(u *openAIUsage) {
	if u == nil {
		return
	}
	in, out, cached := u.Input, u.Output, u.InputDetails.Cached
	if in == nil { // Chat Completions
		in, out, cached = u.Prompt, u.Completion, u.PromptDetails.Cached
	}
	if in == nil || *in < 0 {
		return
	}
	cached = min(max(cached, 0), *in)
	s := &w.usage
	s.u, s.seen = Usage{Input: *in - cached, CacheRead: cached}, true
	if out != nil && *out >= 0 {
		s.u.Output = *out
	}
}
