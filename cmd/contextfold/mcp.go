package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/contextfold/contextfold/internal/core/version"
	"github.com/contextfold/contextfold/internal/proxy/mcp"
	"github.com/contextfold/contextfold/internal/proxy/pgstore"
)

// mcpStdin is where the MCP server reads its client (a variable for tests).
var mcpStdin io.Reader = os.Stdin

func mcpCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcp")
	store := fs.String("store", "", "`directory` of the proxy's fold record (default: the user's state directory, contextfold/proxy), or a postgres:// URL of the PostgreSQL database it records to (docs/TEAM.md)")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		return wantArgs(stderr, "mcp", "no arguments", fs.Args())
	}
	level := logLevel(slog.LevelWarn)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("component", "contextfold mcp")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var tools []mcp.Tool
	if isDatabase(*store) {
		pg, err := pgstore.Open(ctx, *store)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold mcp:", err)
			return 1
		}
		defer pg.Close()
		tools = mcp.ToolsOf(pg)
	} else {
		dir, err := storeDir(*store)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold mcp:", err)
			return 1
		}
		tools = mcp.Tools(dir)
	}
	srv := &mcp.Server{Name: "contextfold", Version: version.Number, Tools: tools, Log: log}
	if err := srv.Serve(ctx, mcpStdin, stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "contextfold mcp:", err)
		return 1
	}
	return 0
}
