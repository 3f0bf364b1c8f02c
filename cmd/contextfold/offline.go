package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/pi/service"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// inspectCmd reports a session's fold state: events, layers, codes and
// whether each recalls, tokens masked, compactions.
func inspectCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	store := fs.String("store", "", "`directory` of the proxy's fold record, for a conversation id (default: the user's state directory, contextfold/proxy)")
	if exit, ok := parse(fs, reorder(args, map[string]bool{"json": false, "store": true}), stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() > 1 {
		return wantArgs(stderr, "inspect", "at most one session", fs.Args())
	}
	t, err := findTarget(fs.Arg(0), *store)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold inspect:", err)
		return 1
	}
	if fs.Arg(0) == "" {
		fmt.Fprintln(stderr, "contextfold inspect: reading the latest session,", t)
	}
	var in any
	var write func()
	if t.proxy {
		c, err := foldstore.ReadFile(t.path)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold inspect:", err)
			return 1
		}
		ci := foldstore.Inspect(t.path, c)
		in, write = ci, func() { foldstore.WriteInspection(stdout, ci) }
	} else {
		svc, err := service.Offline(t.path)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold inspect:", err)
			return 1
		}
		si := svc.Inspect()
		in, write = si, func() { service.WriteInspection(stdout, si) }
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(in)
		return 0
	}
	write()
	return 0
}

// recallCmd reads folded blocks back from a session, verified exactly as
// the recall_folded tool does.
func recallCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("recall")
	grep := fs.String("grep", "", "only the lines holding `T` (case-insensitive)")
	lines := fs.String("lines", "", "only lines `a-b` (1-based, inclusive, a ≤ b), e.g. 40-80")
	chars := fs.String("chars", "", "only characters `a-b`, verbatim (1-based, inclusive, a ≤ b, in UTF-16 units), e.g. 1-7200; wins over -lines and -grep")
	search := fs.String("search", "", "find which folded blocks hold `T` (no code needed); with codes, grep them for it")
	raw := fs.Bool("raw", false, "write one block's exact original to stdout, its bytes and nothing else, after checking them against the fold-time sha256 (exit 1, nothing written, if they fail)")
	store := fs.String("store", "", "`directory` of the proxy's fold record, for a conversation id (default: the user's state directory, contextfold/proxy)")
	if exit, ok := parse(fs, reorder(args, map[string]bool{"grep": true, "lines": true, "chars": true, "search": true, "store": true, "raw": false}), stdout, stderr); !ok {
		return exit
	}
	// The session comes first, unless the first argument is a code: then
	// the latest session is read.
	spec, codes := "", fs.Args()
	if len(codes) > 0 {
		if _, isCode := digest.ParseCode(codes[0]); !isCode || fileExists(codes[0]) {
			spec, codes = codes[0], codes[1:]
		}
	}
	switch {
	case *raw && (*grep != "" || *lines != "" || *chars != "" || *search != ""):
		return usageError(stderr, "recall", "-raw writes a whole block: it takes no -grep, -lines, -chars or -search")
	case *raw && len(codes) != 1:
		return wantArgs(stderr, "recall", "one code with -raw", codes)
	case len(codes) == 0 && *search == "":
		return wantArgs(stderr, "recall", "at least one code (or -search T)", fs.Args())
	case *lines != "" && !recall.ValidLines(*lines):
		return usageError(stderr, "recall", "malformed -lines %q: want a-b, two line numbers with a ≤ b, e.g. -lines 40-80", *lines)
	case *chars != "" && !recall.ValidChars(*chars):
		return usageError(stderr, "recall", "malformed -chars %q: want a-b, two character positions with a ≤ b, e.g. -chars 1-7200", *chars)
	}
	t, err := findTarget(spec, *store)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold recall:", err)
		return 1
	}
	var stores []recall.Store
	if t.proxy {
		c, err := foldstore.ReadFile(t.path)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold recall:", err)
			return 1
		}
		stores = []recall.Store{c.RecallStore()}
	} else {
		svc, err := service.Offline(t.path)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold recall:", err)
			return 1
		}
		if stores, err = svc.Stores(); err != nil {
			fmt.Fprintln(stderr, "contextfold recall:", err)
			return 1
		}
	}
	if spec == "" {
		fmt.Fprintln(stderr, "contextfold recall: reading the latest session,", t)
	}
	if *raw {
		text, err := rawOriginal(stores, codes[0])
		if err != nil {
			fmt.Fprintln(stderr, "contextfold recall:", err)
			return 1
		}
		if _, err := io.WriteString(stdout, text); err != nil {
			fmt.Fprintln(stderr, "contextfold recall:", err)
			return 1
		}
		return 0
	}
	rep := recall.Answer(stores, recall.Request{Codes: codes, Grep: *grep, Lines: *lines, Chars: *chars, Search: *search, Spelling: recall.CLIFlags})
	if rep.IsError {
		fmt.Fprintln(stderr, "contextfold recall:", rep.Text)
		return 1
	}
	fmt.Fprintln(stdout, rep.Text)
	if len(rep.Recalled) == 0 && *search == "" {
		return 1
	}
	return 0
}

// rawOriginal returns the folded block code names, from the first store
// that holds it, once its bytes match the fold-time sha256: -raw writes
// nothing it cannot show to be the original.
func rawOriginal(stores []recall.Store, raw string) (string, error) {
	code, ok := digest.ParseCode(raw)
	if !ok {
		return "", fmt.Errorf("%s: not a fold code", raw)
	}
	for _, st := range stores {
		rec, ok := st.Lookup(code)
		if !ok {
			continue
		}
		o := st.Read(rec)
		switch {
		case o.Why != "":
			return "", fmt.Errorf("%s: %s", code, o.Why)
		case rec.SHA256 == "":
			return "", fmt.Errorf("%s: no fold-time sha256 recorded, so its bytes cannot be verified; read it without -raw", code)
		case registry.Sum(o.Text) != rec.SHA256:
			return "", fmt.Errorf("%s: the text found for it (%s) fails the fold-time sha256 check; nothing written", code, o.Label)
		}
		return o.Text, nil
	}
	return "", fmt.Errorf("%s: no folded block with that code", raw)
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// handoffCmd writes the same handoff seed /fold-handoff writes.
func handoffCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("handoff")
	goal := fs.String("goal", "", "the goal for the next session, written verbatim")
	print := fs.Bool("print", false, "print the seed too, before its path")
	if exit, ok := parse(fs, reorder(args, map[string]bool{"goal": true, "print": false}), stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() > 1 {
		return wantArgs(stderr, "handoff", "at most one session", fs.Args())
	}
	t, err := findPiSession(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "contextfold handoff:", err)
		return 1
	}
	if fs.Arg(0) == "" {
		fmt.Fprintln(stderr, "contextfold handoff: reading the latest session,", t)
	}
	svc, err := service.Offline(t.path)
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
