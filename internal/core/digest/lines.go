package digest

import "strings"

// The one definition of a block's lines, shared by the digest's "N lines",
// the bounded view's line numbers and every recall_folded read (lines=a-b,
// grep, search, and their "of N" notes), so a count or number seen in one is
// valid in the others.
//
// Lines are split at "\n" and a final "\n" ends the last line instead of
// starting an empty one, as wc -l and editors count: nearly every tool output
// ends with a newline, and counting the empty string after it reported a
// phantom line one past the end (a digest's 321 lines, recall's 322). Blank
// lines inside count: lines=a-b addresses lines by position, so a count that
// skipped blanks would not reach the end. "\r\n" ends a line like "\n" (the
// "\r" stays in the line's text; recall serves bytes as they are). The empty
// text has no lines; "\n" is one empty line.

// SplitLines returns the lines of text, as defined above.
func SplitLines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

// LineCount is len(SplitLines(text)) without the allocation.
func LineCount(text string) int {
	if text == "" {
		return 0
	}
	n := strings.Count(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}
