package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions in order: migrations[i] takes the
// schema from version i to i+1. A released migration is never edited; a
// change is a new one appended.
var migrations = []string{
	// 1: conversations and what the file store keeps in each file.
	`
CREATE TABLE conversations (
	name       text PRIMARY KEY, -- foldstore.FileName: a hash, never a client id
	api        text NOT NULL,
	session    text NOT NULL,    -- foldstore.SessionTag ('' for none)
	created    text NOT NULL,    -- RFC 3339, as the file store writes it
	index_text bytea,            -- the last index a client's compaction left
	indexes    integer NOT NULL DEFAULT 0,
	updated    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversations_updated ON conversations (updated);

-- Engine entries (fold, unfold, void) in the order they replay. entry is
-- the entry as the file store encodes it; a fold event is recorded once
-- (conversation, seq), which makes a retried commit harmless.
CREATE TABLE entries (
	pos          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	conversation text NOT NULL REFERENCES conversations (name) ON DELETE CASCADE,
	kind         text NOT NULL,
	seq          integer NOT NULL,
	entry        bytea NOT NULL
);
CREATE UNIQUE INDEX entries_fold ON entries (conversation, seq) WHERE kind = 'fold';
CREATE INDEX entries_conversation ON entries (conversation, pos);

-- The exact bytes of every folded block (not always UTF-8: a lone
-- surrogate is kept as WTF-8), with the sha256 taken over them.
CREATE TABLE texts (
	conversation text NOT NULL REFERENCES conversations (name) ON DELETE CASCADE,
	id           text NOT NULL,
	sha256       text NOT NULL,
	text         bytea NOT NULL,
	PRIMARY KEY (conversation, id)
);

-- Unfolds readers asked for; the writer takes each once.
CREATE TABLE unfold_requests (
	pos          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	conversation text NOT NULL REFERENCES conversations (name) ON DELETE CASCADE,
	codes        text[] NOT NULL,
	taken        boolean NOT NULL DEFAULT false
);
CREATE INDEX unfold_requests_open ON unfold_requests (conversation) WHERE NOT taken;

-- Calls of context-fold's own tools the model made, so the MCP server can
-- tell whose a call is.
CREATE TABLE calls (
	pos          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	conversation text NOT NULL REFERENCES conversations (name) ON DELETE CASCADE,
	id           text NOT NULL,
	name         text NOT NULL,
	ns           text NOT NULL,
	args         bytea NOT NULL,
	at           text NOT NULL
);
CREATE INDEX calls_conversation ON calls (conversation, pos);

-- A conversation that continues from a client's compaction in another's
-- records.
CREATE TABLE aliases (
	name   text PRIMARY KEY,
	target text NOT NULL
);
`,
	// 2: the requests the proxy noted and their responses' usage, for the
	// report page (foldstore.Contents.Requests).
	`
CREATE TABLE requests (
	pos          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	conversation text NOT NULL REFERENCES conversations (name) ON DELETE CASCADE,
	n            integer NOT NULL,
	at           text NOT NULL,
	raw          integer NOT NULL,
	sent         integer NOT NULL,
	win          integer NOT NULL,
	budget       integer NOT NULL,
	reserve      integer NOT NULL,
	seq          integer NOT NULL,
	compactions  integer NOT NULL
);
CREATE INDEX requests_conversation ON requests (conversation, pos);
CREATE TABLE usage (
	pos          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	conversation text NOT NULL REFERENCES conversations (name) ON DELETE CASCADE,
	n            integer NOT NULL,
	input        integer NOT NULL,
	cache_read   integer NOT NULL,
	cache_write  integer NOT NULL,
	output       integer NOT NULL
);
CREATE INDEX usage_conversation ON usage (conversation, pos);
`,
}

// migrationLock is the pg_advisory_lock key the schema is migrated under:
// "contextfold" folded into 63 bits, so that it meets no other program's.
const migrationLock int64 = 0x636f6e7465787466

// migrate brings the schema up to date and returns how many migrations it
// applied. Several processes may start at once: each takes the advisory
// lock in turn and the first applies what is missing, in one transaction
// per version; the others find it applied.
func migrate(ctx context.Context, pool *pgxpool.Pool) (applied int, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return 0, err
	}
	defer func() {
		// A session lock: released here, or when the connection ends.
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock); uerr != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return 0, err
	}
	var cur int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&cur); err != nil {
		return 0, err
	}
	if cur > len(migrations) {
		return 0, fmt.Errorf("the database's schema is version %d, newer than this contextfold's %d", cur, len(migrations))
	}
	for v := cur + 1; v <= len(migrations); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", v)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migration %d: %w", v, err)
		}
		applied++
	}
	return applied, nil
}

// SchemaVersion is the schema version this package migrates to.
func SchemaVersion() int { return len(migrations) }
