package callwatch

import (
	"os"
	"path/filepath"
	"testing"
)

// watchUsage feeds chunks to a new Watcher with OnUsage set, closes it and
// returns the usage reported and how many times it was.
func watchUsage(f Format, stream bool, chunks [][]byte) (Usage, int) {
	u, n, _ := watchBoth(f, stream, nil, chunks)
	return u, n
}

// watchBoth is watchUsage that also returns the calls reported (want as
// for watch): watching the usage must not change them.
func watchBoth(f Format, stream bool, want func(string) bool, chunks [][]byte) (Usage, int, []Call) {
	var got Usage
	var calls []Call
	n := 0
	w := New(f, stream, want, func(c Call) { calls = append(calls, c) })
	w.OnUsage(func(u Usage) { got = u; n++ })
	for _, c := range chunks {
		w.Write(c)
	}
	w.Close()
	w.Close()
	return got, n, calls
}

// TestUsageSamples: the usage of the recorded streams (testdata), in every
// chunking, as their usage objects say.
func TestUsageSamples(t *testing.T) {
	for _, tt := range []struct {
		file string
		f    Format
		want Usage
	}{
		// input_tokens 3, cache_creation 12326, cache_read 0; message_delta's output_tokens 96 replaces message_start's 1.
		{"anthropic-turn1.sse", Messages, Usage{Input: 3, CacheWrite: 12326, Output: 96}},
		{"anthropic-turn3.sse", Messages, Usage{Input: 3, CacheRead: 9827, CacheWrite: 5053, Output: 24}},
		// input_tokens 12174 of which 9161 cached.
		{"responses-turn3.sse", Responses, Usage{Input: 12174 - 9161, CacheRead: 9161, Output: 55}},
		{"responses-turn1.sse", Responses, Usage{Input: 9536, Output: 113}},
		// prompt_tokens 10251 of which 7663 cached.
		{"chat-turn3.sse", Chat, Usage{Input: 10251 - 7663, CacheRead: 7663, Output: 18}},
		{"chat-turn1.sse", Chat, Usage{Input: 7697, Output: 74}},
	} {
		body, err := os.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		calls := watch(tt.f, true, nil, [][]byte{body})
		for name, chunks := range chunkings(body, 7) {
			got, n, gotCalls := watchBoth(tt.f, true, nil, chunks)
			if got != tt.want || n != 1 {
				t.Errorf("%s %s: usage %+v reported %d times, want %+v once", tt.file, name, got, n, tt.want)
			}
			if !sameCalls(gotCalls, calls) {
				t.Errorf("%s %s: with usage watched, calls %s; without %s", tt.file, name, show(gotCalls), show(calls))
			}
		}
	}
}

// TestUsage: the usage of bodies and streams written for the test, JSON
// and streamed, and the ones that report none.
func TestUsage(t *testing.T) {
	for _, tt := range []struct {
		name   string
		f      Format
		stream bool
		body   string
		want   Usage
		none   bool
	}{
		{name: "messages body", f: Messages, body: `{"id":"m","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":3000,"output_tokens":7}}`,
			want: Usage{Input: 10, CacheRead: 3000, CacheWrite: 200, Output: 7}},
		{name: "messages delta cumulative", f: Messages, stream: true,
			body: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n" +
				"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\\\"output_tokens\\\": 99\"}}\n\n" +
				"data: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"input_tokens\":6,\"cache_read_input_tokens\":100,\"cache_creation_input_tokens\":40,\"output_tokens\":30}}\n\n",
			want: Usage{Input: 6, CacheRead: 100, CacheWrite: 40, Output: 30}},
		{name: "messages stream cut before usage", f: Messages, stream: true,
			body: "data: {\"type\":\"ping\"}\n\n", none: true},
		{name: "responses body", f: Responses, body: `{"id":"r","object":"response","output":[],"usage":{"input_tokens":500,"input_tokens_details":{"cached_tokens":384},"output_tokens":20}}`,
			want: Usage{Input: 116, CacheRead: 384, Output: 20}},
		{name: "responses incomplete", f: Responses, stream: true,
			body: "data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"usage\":{\"input_tokens\":50,\"output_tokens\":4096}}}\n\n",
			want: Usage{Input: 50, Output: 4096}},
		{name: "responses created only", f: Responses, stream: true,
			body: "data: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n", none: true},
		{name: "chat body", f: Chat, body: `{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":900,"completion_tokens":12,"prompt_tokens_details":{"cached_tokens":768}}}`,
			want: Usage{Input: 132, CacheRead: 768, Output: 12}},
		{name: "chat stream without include_usage", f: Chat, stream: true,
			body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", none: true},
		{name: "chat cached over prompt", f: Chat, stream: true,
			body: "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":50}}}\n\n",
			want: Usage{CacheRead: 10, Output: 1}},
	} {
		got, n := watchUsage(tt.f, tt.stream, [][]byte{[]byte(tt.body)})
		switch {
		case tt.none && n != 0:
			t.Errorf("%s: reported %+v, want none", tt.name, got)
		case !tt.none && (n != 1 || got != tt.want):
			t.Errorf("%s: usage %+v reported %d times, want %+v once", tt.name, got, n, tt.want)
		}
	}
}

// TestUsageNotWanted: without OnUsage, a watcher parses no usage event.
func TestUsageNotWanted(t *testing.T) {
	w := New(Messages, true, nil, nil)
	w.Write([]byte("data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n"))
	if w.usage.seen {
		t.Fatal("usage read with no one to report it to")
	}
}
