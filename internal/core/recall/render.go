package recall

import (
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/digest"
)

// Labels name what block was served; notes say how far to trust it. A
// served block's note is Notes(route note, slice note), where the route note
// is one of:
//
//	Verified           the session file's text matched the fold-time sha256
//	Legacy             a legacy record without a fold-time sha256: unverified
//	Fallback(why)      the session file could not serve (why); the live block did
//	FullOutputGone     (with the route note) the tool's full-output file is
//	                   gone; a grep or line range saw the truncated result
//
// so no route serves text without saying which it is (docs/EDGES.md #24).
//
// Labels and notes are read by the model and by people at the command line,
// so they name the session file (Pi's file the blocks are read back from),
// never the engine's word for its reader, "ledger".

// LedgerLabel labels a block read from the session file. tool is the tool
// name, or the block kind when there is none.
func LedgerLabel(tool string) string { return tool + " · " + SourceLedger }

// CompactedLabel labels, in a search, a block read from the session file
// that left live history.
func CompactedLabel(tool string) string {
	return tool + " · " + SourceLedger + " (compacted out of view)"
}

// StoreLabel labels a block read from the proxy's record.
func StoreLabel(tool string) string { return tool + " · " + SourceStore }

// ParentLabel labels a block read from the session this one was handed off
// from.
func ParentLabel(tool string) string { return tool + " · " + SourceParent }

// LiveLabel labels a block read from live history: its kind, tool, turn,
// and how many more blocks share its code.
func LiveLabel(kind, toolName string, turn, more int) string {
	s := kind
	if toolName != "" {
		s += " " + toolName
	}
	s += " · turn " + strconv.Itoa(turn)
	if more > 0 {
		s += " (+" + strconv.Itoa(more) + ")"
	}
	return s
}

// Route notes.
const (
	// Verified marks text whose sha256 is the fold-time sha256. The
	// TypeScript says nothing for a verified block; naming it lets the model
	// tell it from the warnings.
	Verified = "sha256 verified"
	// Legacy marks a block served for a record that has no fold-time sha256.
	Legacy = "unverified (legacy record without a fold-time sha256)"
	// FullOutputGone marks a grep or line range that wanted the tool's
	// full-output file and got the truncated result the message kept.
	FullOutputGone = "full output file unreadable — searched the truncated result"
	// Mismatch marks, in a search, a block whose text failed the fold-time
	// sha256 check and was searched anyway (it is the only copy there is):
	// its lines are not known to be what was folded.
	Mismatch = "⚠ UNVERIFIED: this text failed the fold-time sha256 check — it is not the folded bytes"
	// NoRecord marks, in a search, a folded block with no fold record to
	// check its text against.
	NoRecord = "⚠ unverified (no fold record to check it against)"
)

// NotSearched is a search warning: a folded block left out of the sweep
// because its text could not be verified (why).
func NotSearched(code, why string) string { return code + " — not searched: " + why }

// WhyMismatch says the session file holds the block but not the folded
// bytes.
func WhyMismatch(code string) string {
	return "the session file's text for #" + code + " failed the fold-time sha256 check"
}

// WhyStoreMismatch says the proxy's record holds a text for the code that
// is not the folded bytes.
func WhyStoreMismatch(code string) string {
	return "the context-fold record's text for #" + code + " failed the fold-time sha256 check"
}

// WhyNotFound says the session file has no block for the code.
func WhyNotFound(code string) string {
	return "block for #" + code + " was not found in the session file"
}

// WhyNoLedger says there is no session file to read (none, or it could not
// be read).
func WhyNoLedger(code string) string {
	return "no readable session file for #" + code
}

// Fallback is the route note of a live block served because the session
// file could not serve it.
func Fallback(why string) string { return why + " — served from live history" }

// Unavailable is the Failure message when nothing can serve a code.
func Unavailable(why string) string { return "recall unavailable — " + why }

// Notes joins the non-empty notes with " · ".
func Notes(notes ...string) string {
	var kept []string
	for _, n := range notes {
		if n != "" {
			kept = append(kept, n)
		}
	}
	return strings.Join(kept, " · ")
}

// Match is one served code: its label, its note (route and slice notes
// joined) and the text served.
type Match struct {
	Code, Label, Note string
	Text              string
}

// Failure is a code that is folded but that no route could serve.
type Failure struct {
	Code, Message string
}

// The answers to a call without codes.
const (
	NoCodes       = "No codes provided."
	NoCodesRecall = "No codes provided (pass codes, or search=<term> to sweep all folded blocks)."
)

// summary renders the one-line-per-code header: served, failed, missing.
// A missing code is echoed as the caller typed it.
func summary(matches []Match, failures []Failure, missing []string) []string {
	var lines []string
	for _, m := range matches {
		lines = append(lines, "✓ "+m.Code+" — "+m.Label+withSep(" · ", m.Note))
	}
	for _, f := range failures {
		lines = append(lines, "⚠ "+f.Code+" — "+f.Message)
	}
	for _, raw := range missing {
		lines = append(lines, "✗ "+raw+" — no folded block with that code")
	}
	return lines
}

func withSep(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

// RenderRecall renders recall_folded's answer for codes: the header (one
// line per match, failure and missing code, in that order), then each
// match's body. With no match it is the header alone, or NoCodes.
func RenderRecall(matches []Match, failures []Failure, missing []string) string {
	header := strings.Join(summary(matches, failures, missing), "\n")
	if len(matches) == 0 {
		if header == "" {
			return NoCodes
		}
		return header
	}
	var sb strings.Builder
	sb.WriteString(header)
	for _, m := range matches {
		// A blank line after the header, and between bodies.
		sb.WriteString("\n\n=== " + m.Code + " (" + m.Label + ")" + withSep(" — ", m.Note) + " ===\n")
		sb.WriteString(m.Text)
	}
	return sb.String()
}

// RenderSearch renders recall_folded's answer to search=<term>: the note,
// then a "⚠ " line per warning (blocks left out of the sweep), then each
// block's hits under a "=== code (label) ===" line. A hit's note (its route
// note) is in that line, as a recall body's is, and hits from unverified
// blocks are named in the first line as well, so no line of unverified text
// is served without a warning where it is read and where the answer starts.
// The TypeScript search printed none, and served unverified text silently
// (docs/EDGES.md #24).
func RenderSearch(term string, hits []Hit, note string, warnings []string) string {
	var sb strings.Builder
	if len(hits) == 0 {
		where := "any folded block"
		if len(warnings) > 0 {
			where = "the folded blocks searched"
		}
		sb.WriteString(`search "` + term + `" — no matching lines in ` + where + ` (` + note + ")")
	} else {
		sb.WriteString(`search "` + term + `" — ` + note)
	}
	var unverified []string
	for _, h := range hits {
		if h.Unverified {
			unverified = append(unverified, h.Code)
		}
	}
	if len(unverified) > 0 {
		sb.WriteString(" · ⚠ lines from " + strconv.Itoa(len(unverified)) + " " + plural(len(unverified), "block", "blocks") +
			" are UNVERIFIED (not known to be the folded bytes): " + strings.Join(unverified, ", "))
	}
	for _, w := range warnings {
		sb.WriteString("\n⚠ " + w)
	}
	for _, h := range hits {
		sb.WriteString("\n\n=== " + h.Code + " (" + h.Label + ")" + withSep(" — ", h.Note) + " ===\n")
		sb.WriteString(strings.Join(h.Lines, "\n"))
	}
	return sb.String()
}

// Unfold is the outcome of an unfold call.
type Unfold struct {
	// Expanded are the codes released now (Code, Label and an optional
	// Note; Text is not rendered).
	Expanded []Match
	// Already are codes that were unfolded before: nothing to do (docs/EDGES.md #25).
	Already []string
	// Missing are inputs naming no folded block, as typed.
	Missing []string
	// Compacted are inputs naming a folded block that left live history at
	// compaction, as typed: nothing to re-expand, recall still reads it
	// (docs/EDGES.md #13).
	Compacted []string
}

// RenderUnfold renders unfold's answer: a header line per code (expanded,
// already unfolded, missing, compacted), then, when anything was expanded,
// how many and when they return.
func RenderUnfold(u Unfold) string {
	lines := summary(u.Expanded, nil, nil)
	for _, c := range u.Already {
		lines = append(lines, "• "+c+" — already unfolded; its full content is in your context")
	}
	lines = append(lines, summary(nil, nil, u.Missing)...)
	for _, c := range u.Compacted {
		code, ok := digest.ParseCode(c)
		if !ok {
			code = c
		}
		lines = append(lines, "⚠ "+c+" — compacted out of live history; nothing to re-expand. Use recall_folded code="+code+" (with grep=<term> or lines=<a-b>) to read it.")
	}
	header := strings.Join(lines, "\n")
	if len(u.Expanded) > 0 {
		n := len(u.Expanded)
		return header + "\n\nExpanded " + strconv.Itoa(n) + plural(n, " block; its full content returns", " blocks; their full content returns") + " on your next turn."
	}
	if header == "" {
		return NoCodes
	}
	return header
}
