package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/contextfold/contextfold/internal/bench/trajectory"
	"github.com/contextfold/contextfold/internal/core/risk"
)

// lexiconCmd measures the error lexicon on the tool outputs of trajectories:
// how many lines it flags, and samples of hits and of unflagged lines that
// contain a failure-looking word, for a human to judge.
func lexiconCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lexicon")
	samples := fs.Int("samples", 20, "print `n` samples of each kind")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() == 0 {
		return wantArgs(stderr, "lexicon", "at least one trajectory dir or file", nil)
	}
	if *samples < 0 {
		return usageError(stderr, "lexicon", "-samples %d: want 0 or more", *samples)
	}
	var files []string
	for _, a := range fs.Args() {
		fl, err := trajectory.Find(a)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold lexicon:", err)
			return 1
		}
		files = append(files, fl...)
	}
	suspicious := regexp.MustCompile(`(?i)\b(err\w*|fail\w*|exception|denied|warn\w*|exit|traceback|panic\w*|fatal|abort\w*|invalid|cannot|unable|refused|killed|not found)\b`)
	var total, outputs, errs, warns, sus int
	var hits, misses []string
	for _, f := range files {
		ms, err := trajectory.Load(f)
		if err != nil {
			fmt.Fprintln(stderr, "contextfold lexicon:", err)
			return 1
		}
		for _, m := range ms {
			if m.Role != "toolResult" {
				continue
			}
			outputs++
			for _, line := range strings.Split(m.Text, "\n") {
				total++
				switch risk.Classify(line) {
				case risk.Error:
					errs++
					hits = append(hits, line)
				case risk.Warning:
					warns++
				default:
					if suspicious.MatchString(line) {
						sus++
						misses = append(misses, line)
					}
				}
			}
		}
	}
	fmt.Fprintf(stdout, "%d trajectories, %d tool outputs, %d lines\n", len(files), outputs, total)
	fmt.Fprintf(stdout, "flagged error: %d (%.2f%%)  warning: %d (%.2f%%)\n", errs, pct(errs, total), warns, pct(warns, total))
	fmt.Fprintf(stdout, "unflagged lines with a failure-looking word: %d (%.2f%%)\n", sus, pct(sus, total))
	printSamples(stdout, "sample hits", hits, *samples)
	printSamples(stdout, "sample unflagged failure-looking lines", misses, *samples)
	return 0
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// printSamples prints n lines spread evenly over xs, so the sample is
// deterministic and covers the whole set.
func printSamples(w io.Writer, title string, xs []string, n int) {
	fmt.Fprintf(w, "\n%s:\n", title)
	if len(xs) == 0 || n <= 0 {
		return
	}
	step := max(1, len(xs)/n)
	for i := 0; i < len(xs) && i/step < n; i += step {
		l := strings.TrimSpace(xs[i])
		if len(l) > 140 {
			l = l[:140] + "…"
		}
		fmt.Fprintf(w, "  %s\n", l)
	}
}
