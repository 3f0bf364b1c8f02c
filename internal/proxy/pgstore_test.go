package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/proxy/mcp"
	"github.com/contextfold/contextfold/internal/proxy/pgstore"
	"github.com/contextfold/contextfold/internal/testsupport/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// frontOn is a folding proxy in front of up that records to store.
func frontOn(t *testing.T, up *upstream, store foldstore.Backend, window int) (base string, stop func()) {
	folder := NewFolder(store, schedule.Economic{}, window, nil)
	s, _ := front(t, up, up, func(c *Config) { c.Folder = folder })
	return s.URL, func() {
		s.Close()
		folder.Close()
	}
}

func openPG(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// TestPostgresStore: in each wire format, a proxy that records to
// PostgreSQL sends the upstream the very bytes a proxy on the file store
// sends for the same requests; a second proxy, started afresh on the same
// database (another process), rebuilds the conversations from it and goes
// on sending the same bytes; the database holds what the file holds; and
// every folded output reads back byte for byte over MCP from the
// database, sha256-verified.
func TestPostgresStore(t *testing.T) {
	for _, cl := range clients {
		t.Run(string(cl.api), func(t *testing.T) {
			url := pgtest.URL(t)
			fileUp, pgUp := newUpstream(t, "files", nil), newUpstream(t, "pg", nil)
			dir := t.TempDir()
			fileBase, stopFiles := foldingFront(t, fileUp, dir, 40_000)
			defer stopFiles()
			pgBase, stopPG := frontOn(t, pgUp, openPG(t, url), 40_000)
			for n := 1; n <= 30; n++ {
				send(t, fileBase, cl.path, cl.body(n))
				send(t, pgBase, cl.path, cl.body(n))
			}
			stopPG()
			// Another process takes the conversations up from the database.
			pg := openPG(t, url)
			pgBase, stopPG = frontOn(t, pgUp, pg, 40_000)
			defer stopPG()
			for n := 31; n <= 36; n++ {
				send(t, fileBase, cl.path, cl.body(n))
				send(t, pgBase, cl.path, cl.body(n))
			}
			want, got := fileUp.requests(), pgUp.requests()
			if len(got) != len(want) {
				t.Fatalf("%d requests upstream, want %d", len(got), len(want))
			}
			for i := range want {
				if string(got[i].body) != string(want[i].body) {
					t.Fatalf("request %d differs from the file store's at byte %d", i+1, firstDiff(string(got[i].body), string(want[i].body)))
				}
			}
			last := string(got[len(got)-1].body)
			if n := len(codeRE.FindAllString(last, -1)); n < 10 {
				t.Fatalf("only %d blocks folded", n)
			}

			files, _ := foldstore.Files(dir)
			convs, err := pg.Conversations()
			if err != nil || len(files) != 1 || len(convs) != 1 {
				t.Fatalf("%d files, %d conversations in the database (%v)", len(files), len(convs), err)
			}
			fromFile, err := foldstore.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			fromPG, err := pg.Read(convs[0].Name)
			if err != nil {
				t.Fatal(err)
			}
			fromPG.Created = fromFile.Created // made at about the same moment
			// Each proxy noted its own requests, at its own moments.
			if len(fromPG.Requests) == 0 || len(fromPG.Requests) != len(fromFile.Requests) {
				t.Fatalf("the database noted %d requests, the file %d", len(fromPG.Requests), len(fromFile.Requests))
			}
			for i := range fromPG.Requests {
				fromPG.Requests[i].At = fromFile.Requests[i].At
			}
			if !reflect.DeepEqual(fromPG, fromFile) {
				for id, tx := range fromFile.Texts {
					if fromPG.Texts[id] != tx {
						t.Errorf("text %s differs", id)
					}
				}
				t.Fatalf("the database holds %d entries, %d texts, index %q; the file %d, %d, %q",
					len(fromPG.Entries), len(fromPG.Texts), fromPG.Index, len(fromFile.Entries), len(fromFile.Texts), fromFile.Index)
			}

			tools := mcp.ToolsOf(pg)
			for i, m := range codeRE.FindAllStringSubmatch(last, -1) {
				code := m[1]
				var pages []string
				k := 0
				for j, lines := range []string{"1-60", "61-120"} {
					args := `{"codes":["` + code + `"],"lines":"` + lines + `"}`
					id := fmt.Sprintf("toolu_%d_%d", i, j)
					if err := pg.NoteCall(convs[0].Name, foldstore.Call{ID: id, Name: "mcp__contextfold__recall_folded", Args: args, At: time.Now()}); err != nil {
						t.Fatal(err)
					}
					text, isErr := tools[0].Call(context.Background(), json.RawMessage(args), json.RawMessage(`{"claudecode/toolUseId":"`+id+`"}`))
					if isErr || !strings.Contains(text, "sha256 verified") {
						t.Fatalf("recall %s: %.300s", code, text)
					}
					if j == 0 {
						k = turnOf(t, text)
					}
					pages = append(pages, numberedBody(text))
				}
				if got, want := strings.Join(pages, "\n"), strings.TrimSuffix(output(k), "\n"); got != want {
					t.Fatalf("recall %s (turn %d): %d bytes, want %d; first difference at %d", code, k, len(got), len(want), firstDiff(got, want))
				}
			}
		})
	}
}

// TestPostgresUnfold: an unfold asked for over MCP from the database is
// taken up by the proxy on the conversation's next request: the block
// goes out whole again.
func TestPostgresUnfold(t *testing.T) {
	cl := clients[0]
	pg := openPG(t, pgtest.URL(t))
	up := newUpstream(t, "pg", nil)
	base, stop := frontOn(t, up, pg, 40_000)
	defer stop()
	for n := 1; n <= 30; n++ {
		send(t, base, cl.path, cl.body(n))
	}
	reqs := up.requests()
	m := codeRE.FindStringSubmatch(string(reqs[len(reqs)-1].body))
	if m == nil {
		t.Fatal("nothing folded")
	}
	convs, err := pg.Conversations()
	if err != nil || len(convs) != 1 {
		t.Fatalf("%d conversations (%v)", len(convs), err)
	}
	args := `{"codes":["` + m[1] + `"]}`
	if err := pg.NoteCall(convs[0].Name, foldstore.Call{ID: "u1", Name: "unfold", Args: args, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if text, isErr := mcp.ToolsOf(pg)[1].Call(context.Background(), json.RawMessage(args), json.RawMessage(`{"callId":"u1"}`)); isErr {
		t.Fatalf("unfold: %s", text)
	}
	send(t, base, cl.path, cl.body(31))
	reqs = up.requests()
	if strings.Contains(string(reqs[len(reqs)-1].body), "{#"+m[1]+" FOLDED}") {
		t.Fatalf("#%s is still folded after its unfold", m[1])
	}
}

// TestPostgresCallsNoted: a call of context-fold's own tool in a response
// is noted in the database before the client has the end of the call.
func TestPostgresCallsNoted(t *testing.T) {
	pg := openPG(t, pgtest.URL(t))
	up := newUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(recallStream))
	})
	base, stop := frontOn(t, up, pg, 200_000)
	defer stop()
	cl := clients[2] // Messages
	req, _ := http.NewRequest("POST", base+cl.path, strings.NewReader(cl.body(2)))
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-claude-code-session-id", "s")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	noted := false
	for {
		line, err := r.ReadString('\n')
		if strings.Contains(line, "content_block_stop") {
			convs, _ := pg.Conversations()
			for _, c := range convs {
				calls, _ := pg.RecentCalls(c.Name, 0)
				for _, call := range calls {
					noted = noted || call.ID == "toolu_recall" && call.Args == `{"search":"needle"}`
				}
			}
		}
		if err != nil {
			break
		}
	}
	if !noted {
		t.Fatal("the call was not in the database when the client had it")
	}
}
