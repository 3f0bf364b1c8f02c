package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/contextfold/contextfold/internal/service"
)

// inspectCmd reports a Pi session file's fold state: events, layers, codes
// and whether each recalls, tokens masked, compactions.
func inspectCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(reorder(args, map[string]bool{"json": false})); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: contextfold inspect [-json] <session.jsonl>")
		return 2
	}
	svc, err := service.Offline(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "contextfold inspect:", err)
		return 1
	}
	in := svc.Inspect()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(in)
		return 0
	}
	service.WriteInspection(stdout, in)
	return 0
}

// recallCmd reads a folded block back from a session file, verified exactly
// as the recall_folded tool does.
func recallCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("recall", flag.ContinueOnError)
	fs.SetOutput(stderr)
	grep := fs.String("grep", "", "only lines containing this text (case-insensitive)")
	lines := fs.String("lines", "", `a 1-based line range, e.g. "40-80"`)
	search := fs.String("search", "", "find which folded blocks hold this text (no code needed)")
	if err := fs.Parse(reorder(args, map[string]bool{"grep": true, "lines": true, "search": true})); err != nil {
		return 2
	}
	if fs.NArg() < 1 || (fs.NArg() < 2 && *search == "") {
		fmt.Fprintln(stderr, "usage: contextfold recall <session.jsonl> <code>... [-grep T] [-lines a-b] | -search T")
		return 2
	}
	svc, err := service.Offline(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "contextfold recall:", err)
		return 1
	}
	res, err := svc.Recall(service.RecallParams{Codes: fs.Args()[1:], Grep: *grep, Lines: *lines, Search: *search})
	if err != nil {
		fmt.Fprintln(stderr, "contextfold recall:", err)
		return 1
	}
	fmt.Fprintln(stdout, res.Text)
	if d, ok := res.Details.(service.RecallDetails); ok && len(d.Recalled) == 0 && *search == "" {
		return 1
	}
	return 0
}

// handoffCmd writes the same handoff seed /fold-handoff writes.
func handoffCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("handoff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	goal := fs.String("goal", "", "the goal for the next session (verbatim)")
	print := fs.Bool("print", false, "also print the seed")
	if err := fs.Parse(reorder(args, map[string]bool{"goal": true, "print": false})); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, `usage: contextfold handoff <session.jsonl> -goal "…"`)
		return 2
	}
	svc, err := service.Offline(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "contextfold handoff:", err)
		return 1
	}
	res, err := svc.Handoff(*goal)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold handoff:", err)
		return 1
	}
	if *print {
		fmt.Fprintln(stdout, res.Seed)
	}
	fmt.Fprintln(stdout, res.Path)
	return 0
}

// reorder moves flags after positional arguments to the front, so
// "recall file code -grep x" works as well as "recall -grep x file code".
// takesValue names each flag and whether it consumes the next argument.
func reorder(args []string, takesValue map[string]bool) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) > 1 && a[0] == '-' {
			name := a[1:]
			if len(name) > 0 && name[0] == '-' {
				name = name[1:]
			}
			flags = append(flags, a)
			if v, ok := takesValue[name]; ok && v && i+1 < len(args) && !containsEq(name) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func containsEq(s string) bool {
	for _, c := range s {
		if c == '=' {
			return true
		}
	}
	return false
}
