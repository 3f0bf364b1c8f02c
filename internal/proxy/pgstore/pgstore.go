// Package pgstore keeps the proxy's fold records in PostgreSQL: the same
// records the file store (package foldstore) keeps in a conversation's
// file, in tables a team's replicas share. What a conversation holds reads
// back as the very foldstore.Contents the file store would give for the
// same operations, so replaying it rebuilds the same frozen layers.
//
// A fold event's texts and entry are written in one transaction, which has
// committed when Commit returns; a fold event is recorded once per
// conversation and seq, so a retried commit records nothing more. The
// schema is migrated on Open under an advisory lock (see migrate).
//
// contextfold proxy and contextfold mcp use it when -store is a
// postgres:// URL. Not built on it yet: leases (one replica advancing a
// conversation at a time), gc (docs/TEAM.md).
package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// DefaultTimeout bounds one operation on the database.
const DefaultTimeout = 10 * time.Second

// Store is a PostgreSQL database of conversations.
type Store struct {
	pool *pgxpool.Pool
	// Timeout bounds each operation (0: DefaultTimeout).
	Timeout time.Duration
	now     func() time.Time
	applied int
}

// Open connects to the database url names and brings its schema up to
// date. url is a libpq connection string, postgres://user@host:port/db?
// sslmode=… or key=value pairs; what it leaves out comes from the PG*
// environment variables (PGHOST, PGUSER, PGPASSWORD, PGSSLMODE, …), as
// with psql, and "" takes all of it from them. TLS is as sslmode says.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	applied, err := migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return &Store{pool: pool, now: time.Now, applied: applied}, nil
}

// Close closes the store's connections.
func (s *Store) Close() { s.pool.Close() }

// ctx is the context of one operation.
func (s *Store) ctx() (context.Context, context.CancelFunc) {
	d := s.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	return context.WithTimeout(context.Background(), d)
}

// ErrConflict reports a fold event recorded already with other records:
// the conversation was advanced by another writer.
var ErrConflict = errors.New("pgstore: another fold event is recorded under this seq")

// Conversation is one conversation, open for writing.
type Conversation struct {
	s    *Store
	name string
	// voids are the fold events whose commit failed and whose void is
	// not recorded yet: a commit whose outcome is unknown (the connection
	// died after COMMIT was sent) may have landed, and must not replay.
	voids []int
}

// OpenConversation implements foldstore.Backend: name is the
// conversation's foldstore.FileName. Unfold requests made before it was
// opened are not returned by Requests, as with the file store.
func (s *Store) OpenConversation(api, session, name string) (foldstore.Log, *foldstore.Contents, error) {
	c, contents, err := s.Conversation(api, session, name)
	if err != nil {
		return nil, nil, err
	}
	return c, contents, nil
}

// Conversation is OpenConversation with its concrete type.
func (s *Store) Conversation(api, session, name string) (*Conversation, *foldstore.Contents, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	tag := foldstore.SessionTag(api, session)
	created := s.now().UTC().Format(time.RFC3339)
	var contents *foldstore.Contents
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO conversations (name, api, session, created) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO NOTHING`, name, api, tag, created); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE unfold_requests SET taken = true WHERE conversation = $1 AND NOT taken`, name); err != nil {
			return err
		}
		var err error
		contents, err = read(ctx, tx, name)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: conversation %s: %w", name, err)
	}
	if contents.API != api {
		return nil, nil, fmt.Errorf("pgstore: conversation %s belongs to api %q, not %q", name, contents.API, api)
	}
	return &Conversation{s: s, name: name}, contents, nil
}

// Path implements foldstore.Log: the conversation's name, as a Reader
// of the store names it.
func (c *Conversation) Path() string { return c.name }

// Close implements foldstore.Log; the connections are the Store's.
func (c *Conversation) Close() error { return nil }

// Commit implements foldstore.Log: the text of each block ev folds
// (text(id) gives it) and its entry, in one transaction. Committing the
// same event again (the same seq and records) records nothing and returns
// nil; another event under a seq recorded already is ErrConflict.
func (c *Conversation) Commit(ev *engine.Event, text func(id string) (string, bool)) error {
	type row struct{ id, sum, text string }
	rows := make([]row, 0, len(ev.Folds))
	for _, rec := range ev.Folds {
		t, ok := text(rec.ID)
		if !ok {
			return fmt.Errorf("pgstore: no text for folded block %s", rec.ID)
		}
		sum := registry.Sum(t)
		if rec.SHA256 != "" && sum != rec.SHA256 {
			return fmt.Errorf("pgstore: text of %s does not match its fold record", rec.ID)
		}
		rows = append(rows, row{rec.ID, sum, t})
	}
	en := ev.Entry()
	entry := encode(en)
	err := c.write(func(ctx context.Context, tx pgx.Tx) error {
		var pos int64
		err := tx.QueryRow(ctx, `INSERT INTO entries (conversation, kind, seq, entry) VALUES ($1, $2, $3, $4)
ON CONFLICT (conversation, seq) WHERE kind = 'fold' DO NOTHING RETURNING pos`, c.name, string(en.Kind), en.Seq, entry).Scan(&pos)
		if errors.Is(err, pgx.ErrNoRows) {
			// Recorded already: by a retry of this request, or by
			// another writer.
			var have []byte
			if err := tx.QueryRow(ctx, `SELECT entry FROM entries WHERE conversation = $1 AND seq = $2 AND kind = 'fold'`, c.name, en.Seq).Scan(&have); err != nil {
				return err
			}
			if !bytes.Equal(have, entry) {
				return ErrConflict
			}
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range rows {
			if _, err := tx.Exec(ctx, `INSERT INTO texts (conversation, id, sha256, text) VALUES ($1, $2, $3, $4)
ON CONFLICT (conversation, id) DO UPDATE SET sha256 = excluded.sha256, text = excluded.text`, c.name, r.id, r.sum, []byte(r.text)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrConflict) {
		c.voids = append(c.voids, ev.Seq)
		c.write(nil) // the void alone; kept pending if it fails too
	}
	return err
}

// Record implements foldstore.Log.
func (c *Conversation) Record(en engine.Entry) error {
	return c.write(func(ctx context.Context, tx pgx.Tx) error {
		return insertEntry(ctx, tx, c.name, en)
	})
}

// RecordIndex implements foldstore.Log.
func (c *Conversation) RecordIndex(text string) error {
	return c.write(func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE conversations SET index_text = $2, indexes = indexes + 1 WHERE name = $1`, c.name, []byte(text))
		return err
	})
}

// write runs fn in a transaction after recording the pending voids, and
// marks the conversation written.
func (c *Conversation) write(fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := c.s.ctx()
	defer cancel()
	err := pgx.BeginFunc(ctx, c.s.pool, func(tx pgx.Tx) error {
		for _, seq := range c.voids {
			if err := insertEntry(ctx, tx, c.name, engine.VoidEntry(seq)); err != nil {
				return err
			}
		}
		if fn != nil {
			if err := fn(ctx, tx); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE conversations SET updated = now() WHERE name = $1`, c.name)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return err
		}
		return fmt.Errorf("pgstore: conversation %s: %w", c.name, err)
	}
	c.voids = nil
	return nil
}

func insertEntry(ctx context.Context, tx pgx.Tx, name string, en engine.Entry) error {
	_, err := tx.Exec(ctx, `INSERT INTO entries (conversation, kind, seq, entry) VALUES ($1, $2, $3, $4)`, name, string(en.Kind), en.Seq, encode(en))
	return err
}

// encode is an entry as the file store writes it (rawjson, as
// JSON.stringify would).
func encode(en engine.Entry) []byte {
	b, err := rawjson.Marshal(en)
	if err != nil {
		panic(err) // an Entry always encodes
	}
	return b
}

// Requests implements foldstore.Log: each unfold request is returned once.
func (c *Conversation) Requests() ([][]string, error) {
	ctx, cancel := c.s.ctx()
	defer cancel()
	rows, err := c.s.pool.Query(ctx, `UPDATE unfold_requests SET taken = true WHERE conversation = $1 AND NOT taken RETURNING pos, codes`, c.name)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	type req struct {
		pos   int64
		codes []string
	}
	var reqs []req
	var r req
	if _, err := pgx.ForEachRow(rows, []any{&r.pos, &r.codes}, func() error {
		reqs = append(reqs, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	slices.SortFunc(reqs, func(a, b req) int { return int(a.pos - b.pos) })
	var out [][]string
	for _, r := range reqs {
		if len(r.codes) > 0 {
			out = append(out, r.codes)
		}
	}
	return out, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// read reads what conversation name holds, as foldstore.ReadFile reads a
// file. Run in one transaction, it reads one moment of it.
func read(ctx context.Context, q querier, name string) (*foldstore.Contents, error) {
	c := &foldstore.Contents{Texts: map[string]foldstore.Text{}}
	var index []byte
	err := q.QueryRow(ctx, `SELECT api, created, session, index_text, indexes FROM conversations WHERE name = $1`, name).
		Scan(&c.API, &c.Created, &c.Session, &index, &c.Indexes)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoConversation
	}
	if err != nil {
		return nil, err
	}
	c.Index = string(index)

	rows, err := q.Query(ctx, `SELECT entry FROM entries WHERE conversation = $1 ORDER BY pos`, name)
	if err != nil {
		return nil, err
	}
	var raw []byte
	if _, err := pgx.ForEachRow(rows, []any{&raw}, func() error {
		en, err := engine.DecodeEntry(raw)
		if err != nil {
			c.Bad++ // written by a newer context-fold, or damaged
			return nil
		}
		c.Entries = append(c.Entries, en)
		return nil
	}); err != nil {
		return nil, err
	}

	rows, err = q.Query(ctx, `SELECT id, sha256, text FROM texts WHERE conversation = $1`, name)
	if err != nil {
		return nil, err
	}
	var id, sum string
	if _, err := pgx.ForEachRow(rows, []any{&id, &sum, &raw}, func() error {
		c.Texts[id] = foldstore.Text{SHA256: sum, Text: string(raw)}
		return nil
	}); err != nil {
		return nil, err
	}

	rows, err = q.Query(ctx, `SELECT id, name, ns, args, at FROM calls WHERE conversation = $1 ORDER BY pos`, name)
	if err != nil {
		return nil, err
	}
	if c.Calls, err = scanCalls(rows); err != nil {
		return nil, err
	}
	c.Requests, err = readRequests(ctx, q, name)
	return c, err
}

// readRequests returns the requests noted in conversation name with their
// usage, paired as the file store pairs them.
func readRequests(ctx context.Context, q querier, name string) ([]foldstore.Request, error) {
	rows, err := q.Query(ctx, `SELECT n, at, raw, sent, win, budget, reserve, seq, compactions FROM requests WHERE conversation = $1 ORDER BY pos`, name)
	if err != nil {
		return nil, err
	}
	var out []foldstore.Request
	for rows.Next() {
		var r foldstore.Request
		var at string
		if err := rows.Scan(&r.N, &at, &r.Raw, &r.Sent, &r.Window, &r.Budget, &r.Reserve, &r.Seq, &r.Compactions); err != nil {
			rows.Close()
			return nil, err
		}
		r.At, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = q.Query(ctx, `SELECT n, input, cache_read, cache_write, output FROM usage WHERE conversation = $1 ORDER BY pos`, name)
	if err != nil {
		return nil, err
	}
	usage := map[int]foldstore.Usage{}
	for rows.Next() {
		var n int
		var u foldstore.Usage
		if err := rows.Scan(&n, &u.Input, &u.CacheRead, &u.CacheWrite, &u.Output); err != nil {
			rows.Close()
			return nil, err
		}
		usage[n] = u
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	foldstore.PairUsage(out, usage)
	return out, nil
}

func scanCalls(rows pgx.Rows) ([]foldstore.Call, error) {
	var out []foldstore.Call
	var call foldstore.Call
	var args []byte
	var at string
	_, err := pgx.ForEachRow(rows, []any{&call.ID, &call.Name, &call.Namespace, &args, &at}, func() error {
		call.Args = string(args)
		call.At, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, call)
		return nil
	})
	return out, err
}

// ErrNoConversation reports a conversation the store does not hold.
var ErrNoConversation = errors.New("pgstore: no such conversation")

// Alias implements foldstore.Backend.
func (s *Store) Alias(name string) (string, bool) {
	ctx, cancel := s.ctx()
	defer cancel()
	var target string
	if err := s.pool.QueryRow(ctx, `SELECT target FROM aliases WHERE name = $1`, name).Scan(&target); err != nil {
		return "", false
	}
	return target, true
}

// SetAlias implements foldstore.Backend.
func (s *Store) SetAlias(name, target string) error {
	ctx, cancel := s.ctx()
	defer cancel()
	if _, err := s.pool.Exec(ctx, `INSERT INTO aliases (name, target) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET target = excluded.target`, name, target); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// Conversations implements foldstore.Reader.
func (s *Store) Conversations() ([]foldstore.Listing, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT name, updated FROM conversations ORDER BY updated DESC, name`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	var out []foldstore.Listing
	var l foldstore.Listing
	if _, err := pgx.ForEachRow(rows, []any{&l.Name, &l.Written}, func() error {
		out = append(out, l)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return out, nil
}

// Read implements foldstore.Reader.
func (s *Store) Read(name string) (*foldstore.Contents, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var c *foldstore.Contents
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		c, err = read(ctx, tx, name)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNoConversation) {
			return nil, err
		}
		return nil, fmt.Errorf("pgstore: conversation %s: %w", name, err)
	}
	return c, nil
}

// recentCalls is how many of a conversation's latest calls RecentCalls
// returns.
const recentCalls = 64

// RecentCalls implements foldstore.Reader: the conversation's latest
// calls (tail, a file's bytes, does not apply), oldest first.
func (s *Store) RecentCalls(name string, _ int64) ([]foldstore.Call, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, name, ns, args, at FROM
(SELECT pos, id, name, ns, args, at FROM calls WHERE conversation = $1 ORDER BY pos DESC LIMIT $2) AS recent ORDER BY pos`, name, recentCalls)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	calls, err := scanCalls(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return calls, nil
}

// NoteCall implements foldstore.Backend and foldstore.Reader. Like the
// file store's, it only tells the MCP server whose a call is. It marks the
// conversation written, as an append to its file would.
func (s *Store) NoteCall(name string, c foldstore.Call) error {
	return s.insert(name, `INSERT INTO calls (conversation, id, name, ns, args, at) VALUES ($1, $2, $3, $4, $5, $6)`,
		c.ID, c.Name, c.Namespace, []byte(c.Args), c.At.UTC().Format(time.RFC3339Nano))
}

// NoteRequest implements foldstore.Backend.
func (s *Store) NoteRequest(name string, r foldstore.Request) error {
	return s.insert(name, `INSERT INTO requests (conversation, n, at, raw, sent, win, budget, reserve, seq, compactions) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		r.N, r.At.UTC().Format(time.RFC3339Nano), r.Raw, r.Sent, r.Window, r.Budget, r.Reserve, r.Seq, r.Compactions)
}

// NoteUsage implements foldstore.Backend.
func (s *Store) NoteUsage(name string, n int, u foldstore.Usage) error {
	return s.insert(name, `INSERT INTO usage (conversation, n, input, cache_read, cache_write, output) VALUES ($1, $2, $3, $4, $5, $6)`,
		n, u.Input, u.CacheRead, u.CacheWrite, u.Output)
}

// RequestUnfold implements foldstore.Reader.
func (s *Store) RequestUnfold(name string, codes []string) error {
	return s.insert(name, `INSERT INTO unfold_requests (conversation, codes) VALUES ($1, $2)`, codes)
}

// insert runs sql with name and args, and marks conversation name written.
func (s *Store) insert(name, sql string, args ...any) error {
	ctx, cancel := s.ctx()
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sql, append([]any{name}, args...)...); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE conversations SET updated = now() WHERE name = $1`, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: conversation %s: %w", name, err)
	}
	return nil
}

var (
	_ foldstore.Backend = (*Store)(nil)
	_ foldstore.Reader  = (*Store)(nil)
	_ foldstore.Log     = (*Conversation)(nil)
)
