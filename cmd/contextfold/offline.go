package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/contextfold/contextfold/internal/recall"
	"github.com/contextfold/contextfold/internal/service"
)

// inspectCmd reports a Pi session file's fold state: events, layers, codes
// and whether each recalls, tokens masked, compactions.
func inspectCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if exit, ok := parse(fs, reorder(args, map[string]bool{"json": false}), stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 1 {
		return wantArgs(stderr, "inspect", "one session file", fs.Args())
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
	fs := newFlags("recall")
	grep := fs.String("grep", "", "only the lines holding `T` (case-insensitive)")
	lines := fs.String("lines", "", "only lines `a-b` (1-based, inclusive, a ≤ b), e.g. 40-80")
	chars := fs.String("chars", "", "only characters `a-b`, verbatim (1-based, inclusive, a ≤ b, in UTF-16 units), e.g. 1-7200; wins over -lines and -grep")
	search := fs.String("search", "", "find which folded blocks hold `T` (no code needed); with codes, grep them for it")
	if exit, ok := parse(fs, reorder(args, map[string]bool{"grep": true, "lines": true, "chars": true, "search": true}), stdout, stderr); !ok {
		return exit
	}
	switch {
	case fs.NArg() == 0 && *search != "":
		return wantArgs(stderr, "recall", "a session file", nil)
	case fs.NArg() < 2 && *search == "":
		return wantArgs(stderr, "recall", "a session file and at least one code (or -search T)", fs.Args())
	case *lines != "" && !recall.ValidLines(*lines):
		return usageError(stderr, "recall", "malformed -lines %q: want a-b, two line numbers with a ≤ b, e.g. -lines 40-80", *lines)
	case *chars != "" && !recall.ValidChars(*chars):
		return usageError(stderr, "recall", "malformed -chars %q: want a-b, two character positions with a ≤ b, e.g. -chars 1-7200", *chars)
	}
	svc, err := service.Offline(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "contextfold recall:", err)
		return 1
	}
	res, err := svc.Recall(service.RecallParams{Codes: fs.Args()[1:], Grep: *grep, Lines: *lines, Chars: *chars, Search: *search, CLI: true})
	if err != nil {
		fmt.Fprintln(stderr, "contextfold recall:", err)
		return 1
	}
	if res.IsError {
		fmt.Fprintln(stderr, "contextfold recall:", res.Text)
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
	fs := newFlags("handoff")
	goal := fs.String("goal", "", "the goal for the next session, written verbatim")
	print := fs.Bool("print", false, "print the seed too, before its path")
	if exit, ok := parse(fs, reorder(args, map[string]bool{"goal": true, "print": false}), stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 1 {
		return wantArgs(stderr, "handoff", "one session file", fs.Args())
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
	if res.Empty {
		// An answer, not a failure: there is nothing to write yet.
		fmt.Fprintln(stdout, res.Text)
		return 0
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
// Everything after "--" is positional, as flag.Parse reads it.
func reorder(args []string, takesValue map[string]bool) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			return append(append(flags, "--"), pos...)
		}
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
