package compact

import (
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/block"
)

// The handoff seed's layout. Seed writes it and SeedGoal reads it back, so a
// session started from a seed is recognised by the seed's own bytes, never
// by a guess.
const (
	// SeedHeading starts every handoff seed.
	SeedHeading = "# Session handoff seed"
	// ParentPrefix names the parent session file inside a seed, so a
	// session started from it can resolve the parent's fold codes.
	ParentPrefix = "Parent session: "

	seedGoalHeading = "## Goal for the next session"
	seedNoGoal      = "(not stated — say what to do next)"
	seedIndexTitle  = "Parent session index"
)

// Seed is the handoff seed: the goal verbatim, the parent session file, and
// the bounded index of the whole active branch. It has no clock in it: the
// same session and goal give the same bytes.
func Seed(goal, parentFile string, blocks []block.Block, codes map[string]string) string {
	var b strings.Builder
	b.WriteString(SeedHeading + "\n\n")
	if parentFile != "" {
		b.WriteString(ParentPrefix + parentFile + "\n\n")
	}
	b.WriteString("> Everything below is copied verbatim from the parent session: no model wrote any of it, so\n")
	b.WriteString("> identifiers, paths, commands and error strings are exactly as they appeared. The parent's\n")
	b.WriteString("> {#code FOLDED} codes still work here: recall_folded reads them from the parent session file.\n\n")
	b.WriteString(seedGoalHeading + "\n\n")
	if g := strings.TrimSpace(goal); g != "" {
		b.WriteString(goal)
	} else {
		b.WriteString(seedNoGoal)
	}
	b.WriteString("\n\n")
	b.WriteString(Render(Input{Title: seedIndexTitle, Blocks: blocks, Codes: codes, SessionFile: parentFile}))
	return b.String()
}

// SeedGoal returns the goal of a handoff seed written by Seed, verbatim; ok
// is false when text is not a seed or the seed states no goal.
func SeedGoal(text string) (goal string, ok bool) {
	if !strings.HasPrefix(text, SeedHeading+"\n\n") {
		return "", false
	}
	open := "\n\n" + seedGoalHeading + "\n\n"
	i := strings.Index(text, open)
	if i < 0 {
		return "", false
	}
	rest := text[i+len(open):]
	// The goal ends where the parent index's own heading begins (the first
	// one: a goal is typed by a person; the index after it may quote older
	// seeds).
	j := strings.Index(rest, "\n\n# "+seedIndexTitle+" "+Marker+"\n")
	if j < 0 {
		return "", false
	}
	goal = rest[:j]
	if goal == seedNoGoal || strings.TrimSpace(goal) == "" {
		return "", false
	}
	return goal, true
}

// goalHeading heads the summary's goal section; its line count lets a later
// compaction read the goal back out of a carried summary exactly.
const goalHeading = "## Goal this session was handed off with (verbatim from its handoff seed, "

// goalSection renders a seed's goal for a summary, never cut.
func goalSection(goal string) string {
	n := strings.Count(goal, "\n") + 1
	unit := " lines)"
	if n == 1 {
		unit = " line)"
	}
	return "\n" + goalHeading + strconv.Itoa(n) + unit + "\n" + goal + "\n"
}

// carriedGoal finds the goal section of an earlier deterministic summary
// (Pi's previousSummary) and returns the goal and the summary without that
// section; ok is false when there is none.
func carriedGoal(summary string) (goal, rest string, ok bool) {
	first, _, _ := strings.Cut(summary, "\n")
	if !strings.HasPrefix(first, "# ") || !strings.Contains(first, Marker) {
		return "", summary, false // not one of ours
	}
	at := strings.Index(summary, "\n"+goalHeading)
	if at < 0 {
		return "", summary, false
	}
	head := summary[at+1:]
	line, body, _ := strings.Cut(head, "\n")
	count := strings.TrimPrefix(line, goalHeading)
	count, _, _ = strings.Cut(count, " ")
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return "", summary, false
	}
	lines := strings.SplitAfterN(body, "\n", n+1)
	if len(lines) < n {
		return "", summary, false
	}
	goal = strings.TrimSuffix(strings.Join(lines[:n], ""), "\n")
	after := ""
	if len(lines) > n {
		after = lines[n]
	}
	return goal, summary[:at] + after, true
}

// historyGoal is the goal of the handoff seed the history starts from: only
// the first user message can be a seed.
func historyGoal(blocks []block.Block) (string, bool) {
	for i := range blocks {
		if blocks[i].Kind == block.User {
			return SeedGoal(blocks[i].Text)
		}
	}
	return "", false
}
