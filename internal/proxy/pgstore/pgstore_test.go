package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/proxy/pgstore"
	"github.com/contextfold/contextfold/internal/testsupport/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, u string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func event(seq int, texts map[string]string) *engine.Event {
	ev := &engine.Event{Seq: seq, Trigger: "budget"}
	for _, id := range sortedKeys(texts) {
		t := texts[id]
		b, l := registry.Extent(t)
		ev.Folds = append(ev.Folds, registry.Record{ID: id, Code: "c" + id[2:], Seq: seq, Bytes: b, Lines: l, SHA256: registry.Sum(t), Kind: "tool_result", Digest: "{#c" + id[2:] + " FOLDED} digest"})
	}
	return ev
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func lookup(texts map[string]string) func(string) (string, bool) {
	return func(id string) (string, bool) { t, ok := texts[id]; return t, ok }
}

func unquote(t *testing.T, raw string) string {
	t.Helper()
	s, err := rawjson.Unquote([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrateConcurrently: several processes opening a fresh database at
// once all succeed, and the schema is migrated exactly once.
func TestMigrateConcurrently(t *testing.T) {
	u := pgtest.URL(t)
	const n = 8
	var wg sync.WaitGroup
	applied := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s, err := pgstore.Open(context.Background(), u)
			if err != nil {
				errs[i] = err
				return
			}
			applied[i] = pgstore.Applied(s)
			s.Close()
		})
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	if total != pgstore.SchemaVersion() {
		t.Fatalf("%d migrations applied among %d openers, want %d", total, n, pgstore.SchemaVersion())
	}
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, _ := conn.Query(context.Background(), "SELECT version FROM schema_migrations ORDER BY version")
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != pgstore.SchemaVersion() || versions[len(versions)-1] != int32(pgstore.SchemaVersion()) {
		t.Fatalf("schema_migrations holds %v", versions)
	}
	// Opening again applies nothing.
	if s := open(t, u); pgstore.Applied(s) != 0 {
		t.Fatalf("a second open applied %d migrations", pgstore.Applied(s))
	}
}

// both is one operation on a conversation, done to both stores.
type op func(t *testing.T, log foldstore.Log, r foldstore.Reader, name string)

// TestSameContents: the same operations on the file store and on the
// database give the same Contents, field for field and byte for byte:
// what a conversation replays from is the same whichever store holds it.
func TestSameContents(t *testing.T) {
	u := pgtest.URL(t)
	pg := open(t, u)
	texts1 := map[string]string{"r:1": "line 1\nline 2\n", "r:2": "é \u2028 \x00 weird", "r:3": unquote(t, `"half \ud83d and \udc00 low"`)}
	texts2 := map[string]string{"r:4": "", "r:5": "a second event's text\n"}
	texts3 := map[string]string{"r:1": "line 1\nline 2\n"} // folded again after its unfold
	at := time.Date(2026, 12, 7, 22, 0, 0, 123456789, time.UTC)
	ops := []op{
		func(t *testing.T, l foldstore.Log, _ foldstore.Reader, _ string) {
			if err := l.Commit(event(1, texts1), lookup(texts1)); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, _ foldstore.Log, r foldstore.Reader, name string) {
			if err := r.NoteCall(name, foldstore.Call{ID: "call_1", Name: "contextfold_recall_folded", Namespace: "mcp__contextfold", Args: `{"code":"c1","q":"\u00e9"}`, At: at}); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, l foldstore.Log, _ foldstore.Reader, _ string) {
			ev := event(2, texts2)
			ev.Thinking = engine.ThinkingCost{Invalidated: 2, Folded: 1}
			if err := l.Commit(ev, lookup(texts2)); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, l foldstore.Log, _ foldstore.Reader, _ string) {
			if err := l.Record(engine.UnfoldEntry([]string{"r:1"})); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, l foldstore.Log, _ foldstore.Reader, _ string) {
			if err := l.RecordIndex("first index: #c4 #c5"); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, l foldstore.Log, _ foldstore.Reader, _ string) {
			if err := l.Record(engine.VoidEntry(2)); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, l foldstore.Log, _ foldstore.Reader, _ string) {
			if err := l.Commit(event(3, texts3), lookup(texts3)); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, l foldstore.Log, _ foldstore.Reader, _ string) {
			if err := l.RecordIndex("second index"); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T, _ foldstore.Log, r foldstore.Reader, name string) {
			if err := r.NoteCall(name, foldstore.Call{ID: "call_2", Name: "unfold", Args: "{}", At: at.Add(time.Second)}); err != nil {
				t.Fatal(err)
			}
		},
	}

	dir := t.TempDir()
	fs, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	const api, session = "anthropic-messages", "session-1"
	name := foldstore.FileName(api, "scope\x00thread")
	stores := []struct {
		name string
		b    foldstore.Backend
		r    foldstore.Reader
		ref  string // the conversation as the Reader names it
	}{
		{"files", fs, foldstore.DirReader{Dir: dir}, filepath.Join(dir, name)},
		{"postgres", pg, pg, name},
	}
	var want *foldstore.Contents
	for _, st := range stores {
		log, fresh, err := st.b.OpenConversation(api, session, name)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if len(fresh.Entries) != 0 || fresh.API != api || fresh.Session != foldstore.SessionTag(api, session) {
			t.Fatalf("%s: a new conversation holds %+v", st.name, fresh)
		}
		for _, o := range ops {
			o(t, log, st.r, st.ref)
		}
		// The requests and usage the proxy notes for the report page,
		// out of order as they may land.
		for _, r := range []foldstore.Request{
			{N: 2, Raw: 9000, Sent: 4000, Window: 200000, Budget: 150000, Reserve: 33000, Seq: 1, Compactions: 0, At: at.Add(2 * time.Second)},
			{N: 1, Raw: 8000, Sent: 8000, Window: 200000, Budget: 150000, Reserve: 33000, At: at.Add(time.Second)},
		} {
			if err := st.b.NoteRequest(log.Path(), r); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		if err := st.b.NoteUsage(log.Path(), 2, foldstore.Usage{Input: 10, CacheRead: 3900, CacheWrite: 90, Output: 70}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		log.Close()
		got, err := st.r.Read(st.ref)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		// Opening it again (a restarted proxy) reads the same.
		log, again, err := st.b.OpenConversation(api, session, name)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		log.Close()
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("%s: opened again it holds\n%+v\nread, it holds\n%+v", st.name, again, got)
		}
		if want == nil {
			want = got
			// The database's conversation is created at the same second.
			created, err := time.Parse(time.RFC3339, got.Created)
			if err != nil {
				t.Fatal(err)
			}
			pgstore.SetNow(pg, func() time.Time { return created })
			if len(got.Entries) != 5 || len(got.Texts) != 5 || len(got.Calls) != 2 || got.Indexes != 2 ||
				len(got.Requests) != 2 || got.Requests[0].N != 1 || got.Requests[0].Usage != nil || got.Requests[1].Usage == nil {
				t.Fatalf("the file store holds %+v", got)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s holds\n%+v\nthe file store\n%+v", st.name, got, want)
		}
		// Byte for byte: the texts and the encoded entries.
		for id, tx := range want.Texts {
			if got.Texts[id].Text != tx.Text || !got.Texts[id].Verified(nil) {
				t.Fatalf("%s: text %s is %q, want %q", st.name, id, got.Texts[id].Text, tx.Text)
			}
		}
		for i := range want.Entries {
			a, _ := rawjson.Marshal(got.Entries[i])
			b, _ := rawjson.Marshal(want.Entries[i])
			if string(a) != string(b) {
				t.Fatalf("%s: entry %d is %s, want %s", st.name, i, a, b)
			}
		}
		if !reflect.DeepEqual(got.RecallStore().Folded(), want.RecallStore().Folded()) {
			t.Fatalf("%s: recall sees other folded blocks", st.name)
		}
	}
}

// TestCommitIdempotent: a fold event committed twice (a retried request),
// or by two writers at once, is recorded once; another event under the
// same seq is refused.
func TestCommitIdempotent(t *testing.T) {
	u := pgtest.URL(t)
	s := open(t, u)
	const api = "openai-responses"
	name := foldstore.FileName(api, "k")
	c, _, err := s.Conversation(api, "", name)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"r:1": "one\n", "r:2": "two\n"}
	for range 2 {
		if err := c.Commit(event(1, texts), lookup(texts)); err != nil {
			t.Fatal(err)
		}
	}
	// Two writers, each with its own connections, commit event 2 at once.
	texts2 := map[string]string{"r:3": "three\n"}
	const writers = 6
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			st, err := pgstore.Open(context.Background(), u)
			if err != nil {
				errs[i] = err
				return
			}
			defer st.Close()
			c, _, err := st.Conversation(api, "", name)
			if err != nil {
				errs[i] = err
				return
			}
			errs[i] = c.Commit(event(2, texts2), lookup(texts2))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	other := map[string]string{"r:9": "not the same event\n"}
	if err := c.Commit(event(2, other), lookup(other)); !errors.Is(err, pgstore.ErrConflict) {
		t.Fatalf("another event under seq 2: %v, want ErrConflict", err)
	}
	got, err := s.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int
	for _, en := range got.Entries {
		seqs = append(seqs, en.Seq)
	}
	if !reflect.DeepEqual(seqs, []int{1, 2}) || len(got.Texts) != 3 {
		t.Fatalf("recorded events %v and %d texts, want [1 2] and 3", seqs, len(got.Texts))
	}
	if _, ok := got.Texts["r:9"]; ok {
		t.Fatal("the refused event's text was recorded")
	}
}

// TestCommitChecksTexts: an event whose text is missing or does not match
// its record is refused, and nothing of it is recorded.
func TestCommitChecksTexts(t *testing.T) {
	s := open(t, pgtest.URL(t))
	c, _, err := s.Conversation("openai-completions", "", "n")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"r:1": "one", "r:2": "two"}
	if err := c.Commit(event(1, texts), lookup(map[string]string{"r:1": "one"})); err == nil {
		t.Fatal("a missing text was accepted")
	}
	if err := c.Commit(event(1, texts), lookup(map[string]string{"r:1": "one", "r:2": "changed"})); err == nil {
		t.Fatal("a text that does not match its record was accepted")
	}
	got, err := s.Read("n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 0 || len(got.Texts) != 0 {
		t.Fatalf("a refused event left %+v", got)
	}
}

// TestUnfoldRequests: a request made while the conversation is open is
// taken once, in order; one made before it was opened is not, as with the
// file store.
func TestUnfoldRequests(t *testing.T) {
	s := open(t, pgtest.URL(t))
	const api = "anthropic-messages"
	c, _, err := s.Conversation(api, "", "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestUnfold("a", []string{"old"}); err != nil {
		t.Fatal(err)
	}
	c, _, err = s.Conversation(api, "", "a") // a restarted writer
	if err != nil {
		t.Fatal(err)
	}
	for _, codes := range [][]string{{"c1"}, {"c2", "c3"}} {
		if err := s.RequestUnfold("a", codes); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.Requests()
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"c1"}, {"c2", "c3"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
	if got, err := c.Requests(); err != nil || len(got) != 0 {
		t.Fatalf("requests taken again: %v %v", got, err)
	}
	if err := s.RequestUnfold("nobody", []string{"c1"}); err == nil {
		t.Fatal("an unfold request for no conversation was accepted")
	}
}

// TestAliasesAndList: aliases read back, and Conversations lists the
// latest written first.
func TestAliasesAndList(t *testing.T) {
	s := open(t, pgtest.URL(t))
	if _, ok := s.Alias("x"); ok {
		t.Fatal("an alias nobody set")
	}
	for _, target := range []string{"y", "z"} {
		if err := s.SetAlias("x", target); err != nil {
			t.Fatal(err)
		}
		if got, ok := s.Alias("x"); !ok || got != target {
			t.Fatalf("alias %q %v, want %q", got, ok, target)
		}
	}
	for _, n := range []string{"first", "second"} {
		if _, _, err := s.Conversation("openai-responses", "", n); err != nil {
			t.Fatal(err)
		}
	}
	c, _, _ := s.Conversation("openai-responses", "", "first")
	if err := c.RecordIndex("i"); err != nil {
		t.Fatal(err)
	}
	list, err := s.Conversations()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list {
		names = append(names, l.Name)
	}
	if !reflect.DeepEqual(names, []string{"first", "second"}) || list[0].Written.Before(list[1].Written) {
		t.Fatalf("conversations %v, want the last written first", names)
	}
	if _, _, err := s.Conversation("anthropic-messages", "", "first"); err == nil {
		t.Fatal("a conversation opened under another api")
	}
	if _, err := s.Read("none"); !errors.Is(err, pgstore.ErrNoConversation) {
		t.Fatalf("reading no conversation: %v", err)
	}
}

// TestEnvironment: with no URL, the connection comes from the PG*
// environment variables, as with psql.
func TestEnvironment(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	host := q.Get("host")
	if host == "" {
		host = u.Hostname()
	}
	t.Setenv("PGHOST", host)
	if p := q.Get("port"); p != "" {
		t.Setenv("PGPORT", p)
	} else if p := u.Port(); p != "" {
		t.Setenv("PGPORT", p)
	}
	t.Setenv("PGUSER", u.User.Username())
	if pw, ok := u.User.Password(); ok {
		t.Setenv("PGPASSWORD", pw)
	}
	t.Setenv("PGDATABASE", u.Path[1:])
	if m := q.Get("sslmode"); m != "" {
		t.Setenv("PGSSLMODE", m)
	}
	s := open(t, "")
	if _, _, err := s.Conversation("openai-responses", "", fmt.Sprint("env")); err != nil {
		t.Fatal(err)
	}
	// sslmode=require against a server without TLS fails: TLS is as
	// the URL says, never quietly dropped.
	q.Set("sslmode", "require")
	u.RawQuery = q.Encode()
	if _, err := pgstore.Open(context.Background(), u.String()); err == nil {
		t.Fatal("sslmode=require connected to a server without TLS")
	}
}
