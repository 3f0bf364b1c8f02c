package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/proxy"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/proxy/pgstore"
)

// storeDir is the -store flag's directory, or the default one.
func storeDir(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return foldstore.DefaultDir()
}

// isDatabase reports whether a -store value names a PostgreSQL database
// (a libpq URL) rather than a directory.
func isDatabase(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// redacted is a database URL with its password hidden, for logs.
func redacted(store string) string {
	u, err := url.Parse(store)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// storeUsage is the -store flag's help.
const storeUsage = "`directory` of the fold record (default: the user's state directory, contextfold/proxy), or a postgres:// URL of a PostgreSQL database (docs/TEAM.md)"

// proxyGC removes the conversation files not written for a while.
func proxyGC(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("proxy")
	store := fs.String("store", "", storeUsage)
	age := fs.Duration("older-than", 30*24*time.Hour, "remove conversations not written for this `duration`")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		return wantArgs(stderr, "proxy", "no arguments after gc", fs.Args())
	}
	if *age <= 0 {
		return usageError(stderr, "proxy", "-older-than %v: want a positive duration", *age)
	}
	if isDatabase(*store) {
		fmt.Fprintln(stderr, "contextfold proxy gc: a PostgreSQL store has no gc yet (docs/TEAM.md)")
		return 1
	}
	dir, err := storeDir(*store)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold proxy gc:", err)
		return 1
	}
	st, err := foldstore.Open(dir)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold proxy gc:", err)
		return 1
	}
	defer st.Close()
	removed, err := st.GC(*age)
	fmt.Fprintf(stdout, "removed %d conversation %s not written for %v from %s\n", len(removed), plural(len(removed), "file", "files"), *age, dir)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold proxy gc:", err)
		return 1
	}
	return 0
}

// openStore opens the store a -store value names for the proxy: a
// PostgreSQL database (its schema migrated) or a directory (locked for
// this process). where names it for logs, without a password.
func openStore(ctx context.Context, store string) (st foldstore.Backend, where string, closeStore func(), err error) {
	if isDatabase(store) {
		pg, err := pgstore.Open(ctx, store)
		if err != nil {
			return nil, "", nil, err
		}
		return pg, redacted(store), pg.Close, nil
	}
	dir, err := storeDir(store)
	if err != nil {
		return nil, "", nil, err
	}
	fst, err := foldstore.Open(dir)
	if err != nil {
		return nil, "", nil, err
	}
	return fst, dir, func() { fst.Close() }, nil
}

// Defaults of the proxy command's flags.
const (
	defaultListen    = "127.0.0.1:8719"
	defaultAnthropic = "https://api.anthropic.com"
	defaultOpenAI    = "https://api.openai.com"
)

func proxyCmd(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return runProxy(ctx, args, stdout, stderr)
}

// runProxy serves until ctx ends, then drains open requests for a while.
func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "gc" {
		return proxyGC(args[1:], stdout, stderr)
	}
	fs := newFlags("proxy")
	listen := fs.String("listen", defaultListen, "`address` to listen on; a non-loopback one is served with a warning")
	ant := fs.String("anthropic", defaultAnthropic, "Anthropic Messages upstream `URL`; request paths are appended to it")
	oai := fs.String("openai", defaultOpenAI, "OpenAI Responses and Chat Completions upstream `URL`; request paths are appended to it")
	maxBody := fs.Int64("max-body", proxy.DefaultMaxBody, "largest request body in `bytes`")
	fold := fs.Bool("fold", true, "fold stale tool results; -fold=false forwards every request unchanged")
	store := fs.String("store", "", storeUsage)
	window := fs.Int("window", 0, "context window to fold for, in `tokens` (0: the window the client assumes for the model, with its own settings)")
	cut := fs.Bool("cut-through", true, "send a folded request upstream while its body still arrives, predicted from the previous request and confirmed before its last byte; -cut-through=false holds each body until it is whole")
	allowHost := fs.String("allow-host", "", "comma-separated `hosts` (names or IP addresses, no port) to serve besides loopback names and the listen address, as the Host header and as a browser page's Origin: for a gateway or a LAN name; * serves any Host, but a page's Origin must still be loopback, the listen address or listed, and a browser's cross-site request (Sec-Fetch-Site) is refused whatever is listed")
	dropBlock := fs.Bool("drop-block", true, "on a Claude that binds thinking to its prefix, ask the provider to drop the thinking a fold invalidates (thinking.block_binding drop_block, with its beta header) where the client does not; -drop-block=false holds folds until the next user message instead")
	maxMemory := fs.Int64("max-memory", proxy.DefaultMaxHeld, "conversation state held in memory, in `bytes`; the least recently used conversations are dropped (and read back from the store when they return)")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		return wantArgs(stderr, "proxy", "no arguments", fs.Args())
	}
	cfg := proxy.Config{MaxBody: *maxBody, StoreAndForward: !*cut}
	for _, u := range []struct {
		flag, val string
		dst       **url.URL
	}{{"-anthropic", *ant, &cfg.Anthropic}, {"-openai", *oai, &cfg.OpenAI}} {
		parsed, err := url.Parse(u.val)
		if err == nil {
			err = proxy.CheckUpstream(parsed)
		}
		if err != nil {
			return usageError(stderr, "proxy", "%s: %v", u.flag, err)
		}
		*u.dst = parsed
	}
	if *maxBody <= 0 {
		return usageError(stderr, "proxy", "-max-body %d: want a positive number of bytes", *maxBody)
	}
	if *maxMemory <= 0 {
		return usageError(stderr, "proxy", "-max-memory %d: want a positive number of bytes", *maxMemory)
	}
	if *window < 0 {
		return usageError(stderr, "proxy", "-window %d: want a number of tokens", *window)
	}
	for _, h := range strings.Split(*allowHost, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if err := proxy.CheckAllowedHost(h); err != nil {
			return usageError(stderr, "proxy", "-allow-host: %v", err)
		}
		cfg.AllowedHosts = append(cfg.AllowedHosts, h)
	}
	level := logLevel(slog.LevelInfo)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("component", "contextfold proxy")
	cfg.Log = log
	if *fold {
		st, where, closeStore, err := openStore(ctx, *store)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold proxy:", err)
			return 1
		}
		defer closeStore()
		folder := proxy.NewFolder(st, schedule.Default, *window, log)
		folder.MaxHeld = *maxMemory
		folder.HoldThinking = !*dropBlock
		folder.Env = os.Getenv // the client's settings, where the shell exported them to both
		defer folder.Close()
		cfg.Folder = folder
		log.Info("folding", "store", where)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold proxy:", err)
		return 1
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		log.Warn("listening on a non-loopback address: anyone who reaches it can send requests through it to the upstreams", "addr", addr.String())
	}
	// Requests may name the address listened on, as they may loopback.
	cfg.ListenHost = addr.IP.String()
	p, err := proxy.New(cfg)
	if err != nil {
		ln.Close()
		fmt.Fprintln(stderr, "contextfold proxy:", err)
		return 1
	}
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// The first line on stdout is the address, for scripts and tests.
	fmt.Fprintf(stdout, "contextfold proxy listening on http://%s\n", addr)
	log.Info("forwarding", "anthropic", cfg.Anthropic.String(), "openai", cfg.OpenAI.String())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintln(stderr, "contextfold proxy:", err)
		return 1
	case <-ctx.Done():
	}
	// Streams in flight get a while to finish; then the rest is cut.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(stderr, "contextfold proxy:", err)
		return 1
	}
	srv.Close()
	return 0
}
