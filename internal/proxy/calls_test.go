package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// recallStream is an Anthropic stream whose model calls recall_folded.
const recallStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_recall\",\"name\":\"mcp__contextfold__recall_folded\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"search\\\":\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"needle\\\"}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// TestCallsNoted: when the model calls context-fold's own tool in a folded
// conversation's response, the call is noted in the conversation's file
// before the client has read the end of the call (so the MCP server, which
// the client calls next, can tell whose call it is), plain or gzip; the
// stream reaches the client unchanged.
func TestCallsNoted(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			up := newUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if !gz {
					w.Write([]byte(recallStream))
					return
				}
				w.Header().Set("Content-Encoding", "gzip")
				z := gzip.NewWriter(w)
				z.Write([]byte(recallStream))
				z.Close()
			})
			dir := t.TempDir()
			base, stop := foldingFront(t, up, dir, 200_000)
			defer stop()
			cl := clients[2] // Messages
			req, _ := http.NewRequest("POST", base+cl.path, strings.NewReader(cl.body(2)))
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("x-claude-code-session-id", "s")
			req.Header.Set("Accept-Encoding", "gzip") // the client decodes, not the transport
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body bytes.Buffer
			r := bufio.NewReader(res.Body)
			if gz {
				z, err := gzip.NewReader(r)
				if err != nil {
					t.Fatal(err)
				}
				r = bufio.NewReader(z)
			}
			noted := false
			for {
				line, err := r.ReadString('\n')
				body.WriteString(line)
				if strings.Contains(line, "content_block_stop") && !gz {
					// The call is complete in the client's hands: its note
					// must be in the file already.
					noted = hasCall(t, dir, "toolu_recall")
				}
				if err != nil {
					break
				}
			}
			if body.String() != recallStream {
				t.Fatalf("the stream changed:\n%s", body.String())
			}
			// A gzip body is watched beside the stream: its note may come
			// a moment after (the MCP server waits for it).
			for i := 0; gz && !noted && i < 200; i++ {
				time.Sleep(10 * time.Millisecond)
				noted = hasCall(t, dir, "toolu_recall")
			}
			if !noted {
				t.Fatal("the call was not noted in the conversation's file in time")
			}
		})
	}
}

func hasCall(t *testing.T, dir, id string) bool {
	files, _ := foldstore.Files(dir)
	for _, f := range files {
		calls, err := foldstore.RecentCalls(f, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if c.ID == id && c.Args == `{"search":"needle"}` && OwnTool(c.Name) {
				return true
			}
		}
	}
	return false
}
