package wire

import "testing"

func TestStripsEarlierThinking(t *testing.T) {
	cases := map[string]bool{
		"claude-sonnet-4-5-20250929": true,
		"claude-sonnet-4-20250514":   true,
		"claude-3-7-sonnet-20250219": true,
		"claude-opus-4-1":            true,
		"claude-haiku-4-5":           true,
		"fake-claude-haiku-4-5":      true,
		"claude-opus-4-5":            false,
		"claude-opus-4-8":            false,
		"claude-sonnet-4-6":          false,
		"claude-sonnet-5":            false,
		"claude-haiku-5-5":           false,
		"claude-fable-5-1":           false,
		"claude-mythos-5":            false,
		"fake-claude-thinking":       false,
		"":                           false,
	}
	for id, want := range cases {
		if got := StripsEarlierThinking(Model{API: "anthropic-messages", ID: id}); got != want {
			t.Errorf("%s: %v, want %v", id, got, want)
		}
	}
	if StripsEarlierThinking(Model{API: "openai-responses", ID: "claude-haiku-4-5"}) {
		t.Error("only Anthropic wires strip")
	}
	if !StripsEarlierThinking(Model{API: "bedrock-converse-stream", ID: "anthropic.claude-3-7-sonnet-20250219-v1:0"}) {
		t.Error("Bedrock Claude 3.7 strips")
	}
}

func TestPreserved(t *testing.T) {
	cases := []struct {
		m    Model
		want bool
	}{
		{Model{API: "anthropic-messages", ID: "x", MidConvoEffort: true}, true},
		{Model{API: "anthropic-messages", ID: "claude-fable-5-1"}, true},
		{Model{API: "bedrock-converse-stream", ID: "anthropic.claude-opus-5-5-v1"}, true},
		{Model{API: "anthropic-messages", ID: "claude-sonnet-4-5"}, false},
		{Model{API: "openai-responses", ID: "fable-5"}, false},
		{Model{API: "openai-responses", ID: "gpt-6.2"}, true},
		{Model{API: "openai-codex-responses", ID: "gpt-7-codex"}, true},
		{Model{API: "openai-responses", ID: "gpt-6.1"}, false},
		{Model{API: "openai-responses", ID: "gpt-5.6"}, false},
		{Model{}, false},
	}
	for _, c := range cases {
		if got := Preserved(c.m); got != c.want {
			t.Errorf("Preserved(%+v) = %v", c.m, got)
		}
	}
}
