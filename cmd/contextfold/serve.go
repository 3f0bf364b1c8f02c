package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/contextfold/contextfold/internal/core/version"
	"github.com/contextfold/contextfold/internal/pi/protocol"
	"github.com/contextfold/contextfold/internal/pi/service"
)

// logLevel is dflt, or debug when CONTEXTFOLD_DEBUG is 1 or true.
func logLevel(dflt slog.Level) slog.Level {
	if v := os.Getenv("CONTEXTFOLD_DEBUG"); v == "1" || v == "true" {
		return slog.LevelDebug
	}
	return dflt
}

// serveCmd runs the engine service on stdin/stdout for the Pi adapter. It
// exits when stdin closes, so the engine never outlives its Pi process.
//
// Its arguments are parsed before anything is written or read, so -h prints
// the usage alone: no hello frame, no wait on stdin.
func serveCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		return wantArgs(stderr, "serve", "no arguments", fs.Args())
	}
	level := logLevel(slog.LevelWarn)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("component", "contextfold")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if path := os.Getenv("CONTEXTFOLD_CPUPROFILE"); path != "" {
		// Diagnostics: profile the engine process as the adapter drives it.
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	// The engine's heap is small and short-lived per request; collecting less
	// often keeps GC pauses out of the request path.
	debug.SetGCPercent(400)
	conn := protocol.NewConn(stdout)
	if err := conn.Notify("hello", service.Hello{Protocol: protocol.Version, Version: version.Number, Build: version.Build(), Platform: version.Platform()}); err != nil {
		fmt.Fprintln(stderr, "contextfold serve:", err)
		return 1
	}
	svc := service.New(conn, log)
	if err := conn.Serve(ctx, os.Stdin, svc); err != nil {
		log.Error("serve ended", "err", err)
		return 1
	}
	return 0
}
