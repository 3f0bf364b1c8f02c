// Command contextfold is the context-fold engine and its command-line tools.
//
// Usage:
//
//	contextfold <command> [arguments]
//
// Run "contextfold help" for the list of commands.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/contextfold/contextfold/internal/protocol"
	"github.com/contextfold/contextfold/internal/version"
)

type command struct {
	name, usage, summary string
	run                  func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"version", "contextfold version [-json]", "print the version, build and platform", versionCmd},
		{"serve", "contextfold serve", "run the engine for the Pi adapter (stdio protocol)", serveCmd},
		{"demo", "contextfold demo [-window N] [-svg file]", "replay a bundled real session through context-fold and raw", demoCmd},
		{"bench", "contextfold bench [flags] [trajectories]...", "replay sessions through context policies and price them", benchCmd},
		{"inspect", "contextfold inspect [-json] <session.jsonl>", "fold events, layers, codes and recall availability of a Pi session file", inspectCmd},
		{"recall", "contextfold recall <session.jsonl> <code> [-grep T] [-lines a-b]", "read a folded block back from a session file, sha256-verified", recallCmd},
		{"handoff", "contextfold handoff <session.jsonl> -goal \"…\"", "write the /fold-handoff seed for a session file", handoffCmd},
		{"lexicon", "contextfold lexicon <trajectories>...", "measure the error lexicon on tool outputs", lexiconCmd},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	if args[0] == "--version" {
		return versionCmd(nil, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "contextfold: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "contextfold: deterministic, reversible context folding for coding agents")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-44s %s\n", c.usage, c.summary)
	}
}

func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print {version, build, platform, protocol} as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: contextfold version [-json]")
		return 2
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"version": version.Number, "build": version.Build(), "platform": version.Platform(), "protocol": protocol.Version})
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintln(stdout, version.String())
	return 0
}
