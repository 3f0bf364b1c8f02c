package fakellm

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

const gemModel = "gemini-3-fake-thinking"

func gemPost(t *testing.T, s *Server, contents []map[string]any) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"contents":          contents,
		"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "sys"}}},
		"tools":             []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "bash"}}}},
		"generationConfig":  map[string]any{"thinkingConfig": map[string]any{"includeThoughts": true}},
	})
	resp := post(t, strings.TrimSuffix(s.URL(), "/v1")+"/v1beta/models/"+gemModel+":streamGenerateContent?alt=sse", string(body))
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func gemUser(text string) map[string]any {
	return map[string]any{"role": "user", "parts": []any{map[string]any{"text": text}}}
}

// gemConversation runs n tool steps and returns the contents Pi would send
// next, every part as minted.
func gemConversation(t *testing.T, s *Server, n int) []map[string]any {
	t.Helper()
	contents := []map[string]any{gemUser("go")}
	for k := 0; k < n; k++ {
		if code, body := gemPost(t, s, contents); code != http.StatusOK {
			t.Fatalf("step %d: %d %s", k, code, body)
		}
		rec := s.Requests()[s.Len()-1]
		var parts []any
		for _, p := range geminiParts(&rec) {
			parts = append(parts, p)
		}
		tc := rec.Reply.ToolCalls[0]
		contents = append(contents, map[string]any{"role": "model", "parts": parts},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
				"name": "bash", "id": tc.ID, "response": map[string]any{"output": "out " + tc.ID}}}}})
	}
	return contents
}

func TestGeminiThoughtSignatures(t *testing.T) {
	s := start(t, ScriptFunc(antScript), Options{})
	contents := gemConversation(t, s, 3)
	with := func(i, j int, part map[string]any) []map[string]any {
		out := append([]map[string]any(nil), contents...)
		ps := append([]any(nil), out[i]["parts"].([]any)...)
		ps[j] = part
		out[i] = map[string]any{"role": out[i]["role"], "parts": ps}
		return out
	}
	thought := contents[1]["parts"].([]any)[0].(map[string]any)
	call := contents[5]["parts"].([]any)[1].(map[string]any)
	unsignedCall := map[string]any{"functionCall": call["functionCall"]}
	cases := []struct {
		name     string
		contents []map[string]any
		status   int
		want     string
	}{
		{"replay as minted", contents, 200, ""},
		{"thought folded and unsigned", with(1, 0, map[string]any{"text": "{#abc123 FOLDED} thought", "thought": true}), 200, ""},
		{"thought text changed under its signature", with(1, 0, map[string]any{"text": "digest", "thought": true, "thoughtSignature": thought["thoughtSignature"]}), 400, "Corrupted thought signature"},
		{"signature moved to another part", with(3, 0, map[string]any{"text": "I will run step 2", "thought": true, "thoughtSignature": thought["thoughtSignature"]}), 400, "Corrupted thought signature"},
		{"current-turn call without its signature", with(5, 1, unsignedCall), 400, "Function call `bash` in the `5.` content block is missing a `thought_signature`."},
		{"dummy signature", with(5, 1, map[string]any{"functionCall": call["functionCall"], "thoughtSignature": "skip_thought_signature_validator"}), 200, ""},
		{"missing function response", append(append([]map[string]any(nil), contents[:6]...), map[string]any{"role": "user", "parts": []any{}}), 400, "number of function response parts"},
	}
	for _, c := range cases {
		code, body := gemPost(t, s, c.contents)
		if code != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %.300s, want %d %q", c.name, code, body, c.status, c.want)
		}
		if code == 400 && !strings.Contains(body, `"status":"INVALID_ARGUMENT"`) {
			t.Errorf("%s: error shape %s", c.name, body)
		}
	}
	// A call of an earlier turn may come back unsigned.
	earlier := append(with(1, 1, map[string]any{"functionCall": contents[1]["parts"].([]any)[1].(map[string]any)["functionCall"]}), gemUser("next"))
	if code, body := gemPost(t, s, earlier); code != 200 {
		t.Errorf("earlier turn's call unsigned: %d %s", code, body)
	}
}

func TestGeminiStreamAndParse(t *testing.T) {
	s := start(t, ScriptFunc(antScript), Options{ChunkBytes: 8})
	code, body := gemPost(t, s, []map[string]any{gemUser("go")})
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var text, sig string
	var calls int
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ch struct {
			Candidates []struct {
				Content struct {
					Parts []gemPart `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatal(err)
		}
		for _, p := range ch.Candidates[0].Content.Parts {
			if p.Thought && p.Text != nil {
				text += *p.Text
				if p.ThoughtSignature != "" {
					sig = p.ThoughtSignature
				}
			}
			if p.FunctionCall != nil {
				calls++
				if p.ThoughtSignature == "" {
					t.Error("first call without a signature")
				}
			}
		}
	}
	if text != "I will run step 1" || sig == "" || calls != 1 {
		t.Errorf("thought %q sig %q calls %d", text, sig, calls)
	}
	req := s.Requests()[0]
	if req.API != Gemini || req.Model != gemModel || !req.HasTool("bash") || len(req.Messages) != 2 || req.Messages[1].Content != "go" {
		t.Errorf("parsed %+v", req.Request)
	}
	// Without includeThoughts the model does not think.
	b, _ := json.Marshal(map[string]any{"contents": []any{gemUser("go")}, "tools": []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "bash"}}}}})
	resp := post(t, strings.TrimSuffix(s.URL(), "/v1")+"/v1beta/models/"+gemModel+":streamGenerateContent?alt=sse", string(b))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if r := s.Requests()[1]; len(r.Reply.Thinking) != 0 {
		t.Errorf("thought without thinking enabled: %v", r.Reply.Thinking)
	}
}
