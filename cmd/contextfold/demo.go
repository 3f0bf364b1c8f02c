package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/contextfold/contextfold/internal/demo"
)

func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	window := fs.Int("window", 128_000, "context window")
	svg := fs.String("svg", "contextfold-demo.svg", `chart to write ("" for none)`)
	every := fs.Int("every", 40, "print every n-th request")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := demo.Run(stdout, demo.Options{Window: *window, SVG: *svg, Every: *every}); err != nil {
		fmt.Fprintln(stderr, "contextfold demo:", err)
		return 1
	}
	return 0
}
