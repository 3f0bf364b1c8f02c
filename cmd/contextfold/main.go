// Command contextfold is the context-fold engine and its command-line tools.
//
// Usage:
//
//	contextfold <command> [arguments]
//
// Run "contextfold help" for the list of commands and "contextfold help
// <command>" (or "contextfold <command> -h") for one command's usage.
//
// The conventions are those of the go command and esbuild: -h and --help
// print a command's full usage to stdout and exit 0; a usage error (an
// unknown command or flag, a bad flag value, the wrong number of
// arguments) prints one line to stderr and exits 2; any other failure
// prints one line to stderr and exits 1.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/version"
	"github.com/contextfold/contextfold/internal/pi/protocol"
)

// A command is one subcommand: its usage forms, the line the command list
// shows, the paragraph its -h shows, and its entry point.
type command struct {
	name  string
	forms []form
	doc   string
	run   func(args []string, stdout, stderr io.Writer) int
}

// A form is one way to call a command: its arguments after the command's
// name, and what that form does (the first form's is the command's
// summary).
type form struct{ args, summary string }

func commands() []command {
	return []command{
		{"version", []form{{"[-json]", "print the version, build and platform"}},
			"Version prints the engine's version, build, platform and Go version. With -json it prints " +
				"{version, build, platform, protocol}, the form the install check and the Pi adapter read. " +
				"'contextfold --version' is the same command.",
			versionCmd},
		{"serve", []form{{"", "run the engine for the Pi adapter (stdio protocol)"}},
			"Serve runs the engine for the Pi adapter: it speaks the adapter's framed protocol on stdin and " +
				"stdout and exits when stdin closes, so the engine never outlives its Pi process. The adapter " +
				"starts it; there is nothing to type to it. Warnings go to stderr (CONTEXTFOLD_DEBUG=1 logs " +
				"debug lines too).",
			serveCmd},
		{"proxy", []form{
			{"[-listen addr] [-anthropic URL] [-openai URL] [-store dir]", "serve Claude Code, Codex and opencode through a local HTTP proxy"},
			{"gc [-store dir] [-older-than d]", "remove the proxy's records of conversations idle for a while"},
		},
			"Proxy runs a local HTTP proxy for coding agents that talk to their provider over HTTP: point " +
				"Claude Code's ANTHROPIC_BASE_URL at it, or Codex's and opencode's OpenAI base URL at its /v1. " +
				"Anthropic requests (/v1/messages, or any carrying anthropic-version) go to -anthropic, " +
				"everything else to -openai, with the path and query unchanged. Only those two upstreams are " +
				"ever contacted; headers pass through, keys are never logged, streams are forwarded as they " +
				"arrive. It serves only requests addressed to a loopback host name or its listen address " +
				"(-allow-host adds names, e.g. for a gateway) and refuses a browser's requests from pages of " +
				"any other host. The first line on stdout is the address it listens on. It folds stale tool results of " +
				"/v1/messages, /v1/responses and /v1/chat/completions requests, each conversation (named by " +
				"the client's session id) on its own, and keeps each folded output and fold event in that " +
				"conversation's file under -store before the request is sent; 'contextfold mcp' gives the " +
				"model recall_folded and unfold over them. 'proxy gc' removes the files of conversations " +
				"idle longer than -older-than (30 days). -fold=false forwards every request unchanged. " +
				"CONTEXTFOLD_DEBUG=1 logs one line per request (method, path without query, status).",
			proxyCmd},
		{"mcp", []form{{"[-store dir]", "serve recall_folded and unfold over MCP (stdio) for proxied clients"}},
			"Mcp is the MCP server a client started by its MCP configuration runs: it speaks MCP over stdin " +
				"and stdout and offers recall_folded and unfold, with the arguments and answers of the Pi " +
				"tools, over the fold record 'contextfold proxy -fold' keeps in -store. recall_folded reads a " +
				"folded output back, checked against its fold-time sha256; unfold asks the proxy to send the " +
				"block whole from the conversation's next request on.",
			mcpCmd},
		{"demo", []form{{"[-window N] [-svg file] [-every N]", "replay a bundled real session with and without folding"}},
			"Demo replays a real Pi session bundled in the binary through context-fold and through raw " +
				"(no folding): every n-th request's size, a fold event, a byte-exact recall, and the cost of " +
				"both at Anthropic-style prices, with a chart. It needs no arguments, network or key.",
			demoCmd},
		{"bench", []form{{"[flags] [trajectory dir or file]...", "replay sessions through context policies and price them"}},
			"Bench replays agent trajectories (directories or .jsonl files: Pi, Claude Code and Codex session " +
				"files or the bench format; in a checkout, testdata/trajectories when none is named) through " +
				"every context policy at each window, prices every request with prompt caching, and prints a " +
				"Markdown report (JSON with -json). A directory is searched through, as the folder Pi writes " +
				"its sessions to (~/.pi/agent/sessions) is laid out; files in it that are not sessions to " +
				"replay (context-fold's seed index, other formats, sessions with no model request) are skipped " +
				"with one note on stderr. -out writes the report, its JSON and SVG charts; -sweep-fidelity, " +
				"-sweep and -sweep-ladder print parameter grids instead.",
			benchCmd},
		{"inspect", []form{{"[-json] [-store dir] [session]", "report a session's fold events, codes and recall check"}},
			"Inspect reads a Pi session or a conversation contextfold proxy folded and reports its fold " +
				"state: the fold events and their layers, compactions, and every code with its size, whether " +
				"it is folded, unfolded or recorded at compaction, and whether recall can serve it (its text " +
				"checked against the fold-time sha256). The session is a Pi session file or the id Pi prints " +
				"(or a unique prefix of it), a proxy conversation's file or id (its file name in -store), or, " +
				"when none is named, the latest: the newest Pi session of the current directory and proxy " +
				"conversation. -json prints the same as JSON.",
			inspectCmd},
		{"recall", []form{
			{"[session] <code>... [-grep T] [-lines a-b] [-chars a-b]", "read folded blocks back from a session, verified"},
			{"[session] -search T", "find which folded blocks hold a term"},
			{"[session] <code> -raw", "write one folded block's exact original to stdout, verified"},
		},
			"Recall reads folded blocks back from a Pi session or a proxy conversation exactly as the " +
				"recall_folded tool does: each verified against its fold-time sha256 and labelled with what was " +
				"served. The session is named as for inspect (the latest when the first argument is a code). " +
				"A code is bare (q6fnlt) or the whole tag ({#q6fnlt FOLDED}). A whole read is capped; -grep " +
				"keeps the lines holding a term, -lines reads a line range, -chars a character range verbatim " +
				"(a page at a time: the way through a line too long to read whole). -search without a code " +
				"sweeps every folded block for a term. -raw writes one block's exact original to stdout, its " +
				"bytes and nothing else (for a redirect or a pipe), after checking them against the fold-time " +
				"sha256: when they fail, nothing is written and it exits 1. Flags may come after the " +
				"arguments. Exits 1 when no code could be read.",
			recallCmd},
		{"handoff", []form{{`[session] [-goal "…"] [-print]`, "write the /fold-handoff seed for a Pi session"}},
			"Handoff writes the seed /fold-handoff writes for a Pi session (a file, the id Pi prints or a " +
				"unique prefix of it, or, when none is named, the newest of the current directory): the goal verbatim, a " +
				"bounded index of what the session folded, and the session file's path, to " +
				"<sessionDir>/context-fold/<sessionId>/handoff-<sessionId>.md, and prints that path " +
				"(-print prints the seed first). Flags may come after the file.",
			handoffCmd},
		reportCommand(),
		{"lexicon", []form{{"[-samples N] <trajectory dir or file>...", "measure the error lexicon on tool outputs"}},
			"Lexicon measures the error lexicon on the tool outputs of trajectories: how many lines it " +
				"flags as errors and warnings, and evenly spread samples of flagged lines and of unflagged " +
				"lines holding a failure-looking word, for a person to judge.",
			lexiconCmd},
		configCommand(),
		{"help", []form{{"[command]", "print this list, or one command's usage"}},
			"Help prints the list of commands or, given a command, that command's usage: the same as " +
				"'contextfold <command> -h'.",
			helpCmd},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// A command is required: the usage goes where errors go, as the go
		// command does.
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		return helpCmd(args[1:], stdout, stderr)
	case "-version", "--version":
		return versionCmd(args[1:], stdout, stderr)
	}
	if c, ok := lookup(args[0]); ok {
		return c.run(args[1:], stdout, stderr)
	}
	what := "command"
	if strings.HasPrefix(args[0], "-") {
		what = "flag"
	}
	fmt.Fprintf(stderr, "contextfold: unknown %s %q (run 'contextfold help' for usage)\n", what, args[0])
	return 2
}

// usage prints the command list, every form of every command aligned.
func usage(w io.Writer) {
	var rows [][2]string
	width := 0
	for _, c := range commands() {
		for _, f := range c.forms {
			left := strings.TrimSpace(c.name + " " + f.args)
			rows = append(rows, [2]string{left, f.summary})
			width = max(width, utf8.RuneCountInString(left))
		}
	}
	fmt.Fprintln(w, "contextfold: deterministic, reversible context folding for coding agents")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "  contextfold <command> [arguments]")
	fmt.Fprintln(w, "  contextfold --version")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	fmt.Fprintln(w)
	for _, r := range rows {
		// fmt pads by runes, as width counts them.
		fmt.Fprintf(w, "  %-*s  %s\n", width, r[0], r[1])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'contextfold <command> -h' (or 'contextfold help <command>') for a command's usage and flags.")
}

// helpText prints c's full usage: its forms, its paragraph, and fs's flags.
func helpText(w io.Writer, c command, fs *flag.FlagSet) {
	for i, f := range c.forms {
		lead := "usage: "
		if i > 0 {
			lead = "       "
		}
		fmt.Fprintln(w, strings.TrimRight(lead+"contextfold "+c.name+" "+f.args, " "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, wrap(c.doc, 76))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Flags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// wrap breaks s into lines of at most width runes, at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		l := utf8.RuneCountInString(word)
		switch {
		case i == 0:
		case n+1+l > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += l
	}
	return b.String()
}

// newFlags returns a command's flag set, silent: parse reports its errors.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs, a command's flag set. -h, -help and --help
// print the command's usage to stdout (exit 0); a bad flag or flag value
// is a usage error (exit 2). ok is false when the command must return
// exit at once.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (exit int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		c, _ := lookup(fs.Name())
		helpText(stdout, c, fs)
		return 0, false
	}
	return usageError(stderr, fs.Name(), "%v", err), false
}

// usageError prints a usage error as one line and returns its exit code.
func usageError(stderr io.Writer, cmd, format string, a ...any) int {
	fmt.Fprintf(stderr, "contextfold %s: %s (run 'contextfold %s -h' for usage)\n", cmd, fmt.Sprintf(format, a...), cmd)
	return 2
}

// wantArgs is the usage error for a wrong number of positional arguments.
func wantArgs(stderr io.Writer, cmd, want string, got []string) int {
	if len(got) == 0 {
		return usageError(stderr, cmd, "want %s", want)
	}
	return usageError(stderr, cmd, "want %s, got %d %s: %s", want, len(got), plural(len(got), "argument", "arguments"), strings.Join(got, " "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func helpCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("help")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	switch fs.NArg() {
	case 0:
		usage(stdout)
		return 0
	case 1:
		c, ok := lookup(fs.Arg(0))
		if !ok {
			fmt.Fprintf(stderr, "contextfold help: unknown command %q (run 'contextfold help' for the list)\n", fs.Arg(0))
			return 2
		}
		return c.run([]string{"-h"}, stdout, stderr)
	}
	return wantArgs(stderr, "help", "at most one command", fs.Args())
}

func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version")
	asJSON := fs.Bool("json", false, "print {version, build, platform, protocol} as JSON")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		return wantArgs(stderr, "version", "no arguments", fs.Args())
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"version": version.Number, "build": version.Build(), "platform": version.Platform(), "protocol": protocol.Version})
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintln(stdout, version.String())
	return 0
}
