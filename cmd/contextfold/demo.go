package main

import (
	"fmt"
	"io"

	"github.com/contextfold/contextfold/internal/bench/demo"
)

func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo")
	window := fs.Int("window", 128_000, "context window, in tokens")
	svg := fs.String("svg", "contextfold-demo.svg", "write the chart to `file` (\"\" for none)")
	every := fs.Int("every", 40, "print every `n`-th request")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		return wantArgs(stderr, "demo", "no arguments", fs.Args())
	}
	if *window <= 0 {
		return usageError(stderr, "demo", "-window %d: want a positive number of tokens", *window)
	}
	if *every <= 0 {
		return usageError(stderr, "demo", "-every %d: want a positive count", *every)
	}
	if err := demo.Run(stdout, demo.Options{Window: *window, SVG: *svg, Every: *every}); err != nil {
		fmt.Fprintln(stderr, "contextfold demo:", err)
		return 1
	}
	return 0
}
