package compaction

import (
	"testing"

	"github.com/contextfold/contextfold/internal/core/wire"
)

func TestFor(t *testing.T) {
	claude := wire.Model{Provider: "anthropic", ID: "claude-x"}
	local := wire.Model{Provider: "ollama", ID: "qwen"}
	cases := []struct {
		name, raw string
		m         wire.Model
		want      Effective
		reserve   int
	}{
		{"absent", ``, claude, Effective{true, 16384, 20000}, 16384},
		{"null", `null`, claude, Effective{true, 16384, 20000}, 16384},
		{"empty", `{}`, claude, Effective{true, 16384, 20000}, 16384},
		{"disabled", `{"enabled":false}`, claude, Effective{false, 16384, 20000}, 0},
		{"ordinary", `{"reserveTokens":4096,"keepRecentTokens":8000}`, claude, Effective{true, 4096, 8000}, 4096},
		{"override wins", `{"reserveTokens":4096,"modelOverrides":{"ollama/qwen":{"reserveTokens":1000}}}`, local, Effective{true, 1000, 20000}, 1000},
		{"override of another model", `{"reserveTokens":4096,"modelOverrides":{"ollama/qwen":{"reserveTokens":1000}}}`, claude, Effective{true, 4096, 20000}, 4096},
		{"unknown model ignores overrides", `{"modelOverrides":{"/":{"reserveTokens":1}}}`, wire.Model{}, Effective{true, 16384, 20000}, 16384},
		{"unknown fields", `{"reserveTokens":0,"future":1}`, claude, Effective{true, 0, 20000}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse([]byte(c.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.For(c.m); got != c.want {
				t.Errorf("For = %+v, want %+v", got, c.want)
			}
			if got := s.Reserve(c.m); got != c.reserve {
				t.Errorf("Reserve = %d, want %d", got, c.reserve)
			}
		})
	}
}

func TestParseRejectsWhatPiRejects(t *testing.T) {
	for _, raw := range []string{
		`{"reserveTokens":-1}`,
		`{"reserveTokens":1.5}`,
		`{"reserveTokens":"16384"}`,
		`{"keepRecentTokens":-3}`,
		`{"modelOverrides":{"a/b":{"reserveTokens":-1}}}`,
		`{"modelOverrides":{"a/b":7}}`,
		`[1]`,
		`{`,
	} {
		if _, err := Parse([]byte(raw)); err == nil {
			t.Errorf("Parse(%s): no error", raw)
		}
	}
}
