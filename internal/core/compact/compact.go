// Package compact renders the deterministic summary that replaces Pi's LLM
// compaction, and the handoff seed for a fresh session: a bounded, verbatim
// index of a span of history — what the user asked, files touched, commands
// run, error lines, identifiers, and a recovery pointer (fold code) per
// block — plus how to get any detail back.
//
// Nothing is paraphrased: every string is copied from the blocks, so the
// summary cannot invent an instruction. The same blocks always render to the
// same bytes. The text fits a budget; when it does not, whole items are cut,
// least valuable section first and oldest item first: identifiers, then
// recovery pointers, files, commands, the carried earlier summary, error
// lines, and user intents last. The goal of the handoff seed a session
// started from is never cut.
package compact

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/seedindex"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// Marker is in the heading of every rendering, so a compaction entry can be
// told apart from one Pi's model wrote.
const Marker = "(deterministic: no model wrote this)"

// DefaultBudget bounds a rendering, in UTF-16 units (about 3,000 tokens).
const DefaultBudget = 12_000

// Per-section caps, applied before the budget.
const (
	maxUsers, maxFiles, maxCommands, maxErrors, maxIdents, maxPointers = 40, 60, 40, 48, 80, 60
	carriedMax                                                         = 4_000
)

// Input is what one rendering covers.
type Input struct {
	// Title is the heading, e.g. "Compaction summary".
	Title string
	// Seq, when set, numbers the rendering in its heading, so two
	// compactions of one session never carry the same text (Pi finds the
	// compaction entry it reports by its summary text).
	Seq int
	// Blocks are the history, in order.
	Blocks []block.Block
	// Codes maps a block id to its fold code, for blocks with a fold record.
	Codes map[string]string
	// SessionFile names the session file holding every byte.
	SessionFile string
	// Carried is an earlier summary (Pi's previousSummary), shown last and
	// marked unverified.
	Carried string
	// Budget bounds the text in UTF-16 units; 0 means DefaultBudget.
	Budget int
}

type section struct {
	title string
	// one and many name the items in cut notes ("error line", "error lines").
	one, many string
	items     []string
	// blockCut items were over a block's share (perBlock a block, the
	// first kept); capCut went over the section's cap and budgetCut were cut
	// to fit the budget, both the oldest. A note says which cut how many.
	perBlock, blockCut, cap, capCut, budgetCut int
	// inline sections render their items on one line joined by " · ".
	inline bool
}

// notes are the section's cut notes, oldest cut first.
func (s *section) notes() []string {
	var out []string
	switch {
	case s.blockCut > 0 && s.capCut > 0:
		out = append(out, fmt.Sprintf("… %s not shown (at most %d a block, %d in all)", s.count(s.blockCut+s.capCut, "more"), s.perBlock, s.cap))
	case s.blockCut > 0:
		out = append(out, fmt.Sprintf("… %s not shown (at most %d a block)", s.count(s.blockCut, "more"), s.perBlock))
	case s.capCut > 0:
		out = append(out, fmt.Sprintf("… %s not shown (section cap %d)", s.count(s.capCut, "older"), s.cap))
	}
	if s.budgetCut > 0 {
		if s.one == "" {
			out = append(out, "… cut to fit the summary's budget")
		} else {
			out = append(out, fmt.Sprintf("… %s cut to fit the summary's budget", s.count(s.budgetCut, "older")))
		}
	}
	return out
}

func (s *section) count(n int, adj string) string {
	if n == 1 {
		return "1 " + adj + " " + s.one
	}
	return strconv.Itoa(n) + " " + adj + " " + s.many
}

// size is the section's rendered size, its title and notes included.
func (s *section) size() int {
	if len(s.items) == 0 && s.blockCut == 0 && s.capCut == 0 && s.budgetCut == 0 {
		return 0
	}
	n := tokens.Units(s.title) + 4
	for _, it := range s.items {
		n += tokens.Units(it) + 3
	}
	for _, l := range s.notes() {
		n += tokens.Units(l) + 1
	}
	return n
}

// Render writes the summary.
func Render(in Input) string {
	budget := in.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	calls := map[string]*block.Block{}
	for i := range in.Blocks {
		if b := &in.Blocks[i]; b.Kind == block.ToolCall && b.CallID != "" {
			calls[b.CallID] = b
		}
	}
	tag := func(turn int, id string) string {
		s := "turn " + strconv.Itoa(turn)
		if c, ok := in.Codes[id]; ok {
			s += " · " + digest.Tag(c)
		}
		return "[" + s + "]"
	}
	// A session started from a handoff seed keeps the seed's goal verbatim
	// in every summary: from the seed while the history holds it, else from
	// the earlier summary carried in (which then drops its copy).
	goal, haveGoal := historyGoal(in.Blocks)
	carriedText := in.Carried
	if g, rest, ok := carriedGoal(in.Carried); ok {
		carriedText = rest
		if !haveGoal {
			goal, haveGoal = g, true
		}
	}
	goalText := ""
	if haveGoal {
		goalText = goalSection(goal)
	}
	var users, files, cmds, errs, idents, pointers []string
	seenFile, seenIdent, seenErr, seenUser := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	// A block gives at most seedindex's per-block share of files, error
	// lines and identifiers, so one flood cannot crowd out every other
	// block; the all* sets count what the shares leave out, for exact notes.
	allIdent, allErr := map[string]bool{}, map[string]bool{}
	addFile := func(f string) {
		if f != "" && !seenFile[f] {
			seenFile[f] = true
			files = append(files, "`"+f+"`")
		}
	}
	type cmdRun struct {
		cmd, tag string
		n, last  int
	}
	runs := map[string]*cmdRun{}
	for i := range in.Blocks {
		b := &in.Blocks[i]
		switch b.Kind {
		case block.User:
			if l := tokens.FirstLine(b.Text, 200); l != "" && !seenUser[l] {
				seenUser[l] = true
				users = append(users, "[turn "+strconv.Itoa(b.Turn)+"] "+l)
			}
		case block.ToolCall:
			fs, cmd := seedindex.CallFacts(b)
			for _, f := range fs {
				addFile(f)
			}
			if cmd != "" {
				// A command run again is listed once, at its newest run,
				// whose output is the one that still holds.
				r := runs[cmd]
				if r == nil {
					r = &cmdRun{cmd: cmd}
					runs[cmd] = r
				}
				r.n++
				r.tag, r.last = tag(b.Turn, "r:"+b.CallID), i
			}
		case block.ToolResult:
			name := b.ToolName
			if call, ok := calls[b.CallID]; ok && name == "" {
				name = call.ToolName
			}
			if !seedindex.OwnAnswer(name) {
				// Files touched are those the calls name; a path an output
				// merely mentions (an import, a URL path) was not touched.
				lines := risk.Lines(b.Text, risk.Error)
				f := seedindex.ExtractAll(b.Text, lines)
				for k, e := range f.Errors {
					if allErr[e] = true; k < seedindex.MaxErrors && !seenErr[e] {
						seenErr[e] = true
						errs = append(errs, tag(b.Turn, b.ID)+" "+e)
					}
				}
				for k, id := range f.Identifiers {
					if allIdent[id] = true; k < seedindex.MaxIdentifiers && !seenIdent[id] {
						seenIdent[id] = true
						idents = append(idents, "`"+id+"`")
					}
				}
			}
			if c, ok := in.Codes[b.ID]; ok {
				pointers = append(pointers, fmt.Sprintf("%s %s · turn %d · %d lines", digest.Tag(c), name, b.Turn, strings.Count(b.Text, "\n")+1))
			}
		case block.Thinking:
			if c, ok := in.Codes[b.ID]; ok {
				pointers = append(pointers, fmt.Sprintf("%s thinking · turn %d", digest.Tag(c), b.Turn))
			}
		}
	}
	byLast := make([]*cmdRun, 0, len(runs))
	for _, r := range runs {
		byLast = append(byLast, r)
	}
	sort.Slice(byLast, func(a, b int) bool { return byLast[a].last < byLast[b].last })
	for _, r := range byLast {
		item := r.tag + " `" + strings.ReplaceAll(r.cmd, "`", "'") + "`"
		if r.n > 1 {
			item += " (run " + strconv.Itoa(r.n) + " times; the newest run shown)"
		}
		cmds = append(cmds, item)
	}
	// Oldest items go first when a section is over its cap.
	capped := func(title, one, many string, xs []string, n int, inline bool) *section {
		kept := newest(xs, n)
		return &section{title: title, one: one, many: many, items: kept, cap: n, capCut: len(xs) - len(kept), inline: inline}
	}
	shared := func(s *section, all map[string]bool, perBlock int) *section {
		s.perBlock, s.blockCut = perBlock, len(all)-len(s.items)-s.capCut
		return s
	}
	secs := []*section{
		shared(capped("Exact identifiers (grep keys for recall_folded)", "identifier", "identifiers", idents, maxIdents, true), allIdent, seedindex.MaxIdentifiers),
		capped("Recovery pointers", "recovery pointer", "recovery pointers", pointers, maxPointers, false),
		capped("Files touched (named by the calls)", "file", "files", files, maxFiles, true),
		capped("Commands run", "command", "commands", cmds, maxCommands, false),
		capped("Carried summary from an earlier compaction (not verified: check it against the session before relying on it)", "", "", carried(carriedText), 1, false),
		shared(capped(errorsTitle, "error line", "error lines", errs, maxErrors, false), allErr, seedindex.MaxErrors),
		capped("User intents (first lines, in order)", "user intent", "user intents", users, maxUsers, false),
	}
	carriedSec := secs[4]
	header := headerText(in)
	total := tokens.Units(header) + tokens.Units(goalText) // the goal is never cut
	for _, s := range secs {
		total += s.size()
	}
	for _, s := range secs { // cut order: the slice order
		for total > budget && len(s.items) > 0 {
			before := s.size()
			s.items = s.items[1:]
			s.budgetCut++
			total += s.size() - before
		}
	}
	// Render in reading order: the seed's goal, intents, files, commands,
	// errors, identifiers, pointers, carried.
	order := []*section{secs[6], secs[2], secs[3], secs[5], secs[0], secs[1], carriedSec}
	var sb strings.Builder
	sb.WriteString(header)
	sb.WriteString(goalText)
	for _, s := range order {
		if s.size() == 0 {
			continue
		}
		fmt.Fprintf(&sb, "\n## %s\n", s.title)
		for _, l := range s.notes() {
			sb.WriteString(l + "\n")
		}
		if len(s.items) == 0 {
			continue
		}
		if s.inline {
			sb.WriteString(strings.Join(s.items, " · "))
			sb.WriteByte('\n')
			continue
		}
		for _, it := range s.items {
			if s == carriedSec {
				sb.WriteString(it)
				sb.WriteByte('\n')
				continue
			}
			sb.WriteString("- " + it + "\n")
		}
	}
	return strings.TrimRight(sb.String(), "\n")
}

// newest keeps the newest n items.
func newest(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return xs[len(xs)-n:]
}

func carried(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if tokens.Units(s) > carriedMax {
		s = tokens.SafeSlice(s, carriedMax) + tokens.Ellipsis
	}
	return []string{s}
}

func headerText(in Input) string {
	title := in.Title
	if title == "" {
		title = "Compaction summary"
	}
	var sb strings.Builder
	if in.Seq > 0 {
		title += " #" + strconv.Itoa(in.Seq)
	}
	fmt.Fprintf(&sb, "# %s %s\n\n", title, Marker)
	sb.WriteString("Everything below is copied verbatim from the session; nothing is paraphrased.\n")
	sb.WriteString("Every byte of the history is kept in the session file")
	if in.SessionFile != "" {
		sb.WriteString(" " + in.SessionFile)
	}
	sb.WriteString(".\nTo recover detail: `recall_folded search=<term>` finds which folded block holds a term;\n")
	sb.WriteString("`recall_folded code=<code>` (optionally grep=<term> or lines=<a-b>) reads one back, sha256-verified.\n")
	return sb.String()
}

// errorsTitle heads the error lines: whole and verbatim, except that a line
// past the seed index's clip is cut and marked.
var errorsTitle = fmt.Sprintf("Error lines (verbatim; one over %d characters ends in %s where it was cut)", seedindex.ErrorClip, tokens.Ellipsis)
