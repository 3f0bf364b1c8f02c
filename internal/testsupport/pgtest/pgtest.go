// Package pgtest gives tests a real PostgreSQL: a throw-away cluster
// started once per test package, by its first test that asks for a
// database, and stopped by Main (called from TestMain), or the server
// CONTEXTFOLD_PG_URL names, and a fresh database per test (URL). Nothing
// is mocked.
//
// The cluster is initdb'd into a temporary directory and listens on a
// free loopback port (and a unix socket in the directory). PostgreSQL refuses to run as root, so as root it runs
// as the postgres user (Debian's package makes one), else nobody, through
// runuser. Without PostgreSQL, URL skips the test, or fails it when CI or
// CONTEXTFOLD_E2E is set: there it must run.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable that points the tests at a server instead:
// a postgres:// URL of a role that may create databases.
const EnvURL = "CONTEXTFOLD_PG_URL"

var (
	// admin is the URL of the server's maintenance database; "" when
	// there is no server, and missing says why. once starts the server
	// for the first test that needs one; stop stops it.
	admin   string
	missing string
	once    sync.Once
	stop    func()
	dbs     atomic.Int64
)

// Main runs the package's tests (m), stops the cluster if one of them
// started it, and exits.
func Main(m *testing.M) {
	code := m.Run()
	if stop != nil {
		stop()
	}
	os.Exit(code)
}

// server sets admin, starting the cluster the first time it is called.
// Only a package whose TestMain calls Main may start one: nothing else
// would stop it.
func server() {
	once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			admin = u
			return
		}
		var err error
		if stop, err = start(); err != nil {
			missing = err.Error()
		}
	})
}

// URL returns the URL of a new empty database for t, dropped when t ends.
// The package's TestMain must call Main.
func URL(t testing.TB) string {
	t.Helper()
	server()
	if admin == "" {
		if os.Getenv("CI") != "" || os.Getenv("CONTEXTFOLD_E2E") != "" {
			t.Fatalf("PostgreSQL is required here (apt-get install -y postgresql): %s", missing)
		}
		t.Skipf("no PostgreSQL: %s", missing)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	name := fmt.Sprintf("contextfold_test_%d_%d", os.Getpid(), dbs.Add(1))
	exec := func(sql string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatalf("connect to the test server: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE DATABASE " + name)
	t.Cleanup(func() { exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u.Path = "/" + name
	return u.String()
}

// binDir finds PostgreSQL's server programs: Debian's newest version
// directory, else PATH.
func binDir() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	if len(found) > 0 {
		return filepath.Dir(found[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL is not installed (no initdb)")
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// version is the major version in a Debian path /usr/lib/postgresql/N/bin/….
func version(p string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return n
}

// start initdbs and starts a cluster, and returns what stops it and
// removes its directory.
func start() (stop func(), err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	// As root, the server's programs run as an unprivileged user that
	// owns the directory, in /tmp: root's TMPDIR may be out of its reach.
	var as []string
	base := ""
	var uid, gid int
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			return nil, fmt.Errorf("no user to run PostgreSQL as: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		as = []string{"runuser", "-u", u.Username, "--"}
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "contextfold-pg-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if as != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			cleanup()
			return nil, err
		}
	}
	cmd := func(name string, args ...string) error {
		argv := append(append(as[:len(as):len(as)], filepath.Join(bin, name)), args...)
		c := exec.Command(argv[0], argv[1:]...)
		c.Dir = dir
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", name, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := cmd("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		cleanup()
		return nil, err
	}
	// On loopback only, at a free port, and a unix socket in dir.
	// fsync off: the tests check transactions, not the disk.
	port, err := freePort()
	if err != nil {
		cleanup()
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -k %s -p %d -c fsync=off -c max_connections=200", dir, port)
	if err := cmd("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		if b, rerr := os.ReadFile(filepath.Join(dir, "log")); rerr == nil {
			err = fmt.Errorf("%w\n%s", err, strings.TrimSpace(string(b)))
		}
		cleanup()
		return nil, err
	}
	admin = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return func() {
		cmd("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
		cleanup()
	}, nil
}
