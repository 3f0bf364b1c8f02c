package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// Tool-call ids the LongSession script uses, so tests can find the matching
// tool results in later requests (Request.ToolResult).
const (
	RecallCallID = "call_recall"
	UnfoldCallID = "call_unfold"
)

// GenCallID returns the tool-call id of gen.sh step i.
func GenCallID(i int) string { return fmt.Sprintf("call_gen_%d", i) }

// StepOfCallID returns i for GenCallID(i).
func StepOfCallID(id string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "call_gen_"))
	if err != nil || !strings.HasPrefix(id, "call_gen_") {
		return 0, false
	}
	return n, true
}

// GenCommand returns the bash command of gen.sh step i.
func GenCommand(i int) string { return fmt.Sprintf("bash gen.sh %d", i) }

// LongSession is a fakellm.Script that drives a long tool-using session:
//
//  1. bash "bash gen.sh <i>" for i = 1..Steps (multi-KB output with a buried
//     "ERROR: step <i> failed" line);
//  2. unless SkipRecall: if the context holds a {#code FOLDED} tag and the
//     request declares recall_folded, recall_folded {"codes":["<first code>"]};
//  3. unless SkipUnfold: likewise, unfold {"codes":["<code>"]} (the recalled
//     code if it is still folded, else the first code);
//  4. a final text answer, Final.
//
// Every decision is made from the request content, not from a counter, so
// retries and re-sent requests are answered identically. The step reached is
// the highest i among the "bash gen.sh <i>" tool calls in the context (equal
// to the number of tool results while nothing has been compacted away), or
// the progress marker that Summary writes into Pi's compaction summaries, so
// the session also survives Pi's own compaction. A phase counts as done once
// its tool call (or the marker) is in the context. Phases 2 and 3 are skipped
// when no tag is present at that point.
//
// The zero value runs all phases with Steps = 40. A LongSession must not be
// copied after first use.
type LongSession struct {
	// Steps is the number of gen.sh calls; 0 means 40.
	Steps int
	// SkipRecall and SkipUnfold switch phases 2 and 3 off.
	SkipRecall, SkipUnfold bool
	// Final is the final answer; "" means "FINAL: done after <Steps> steps".
	Final string
	// MaxReplies is a safety net against a context that never shows
	// progress: after that many tool-declaring requests the script answers
	// with a final "LONGSESSION ABORTED" text. 0 means 4*Steps+20.
	MaxReplies int

	mu       sync.Mutex
	replies  int
	recalled []string
	unfolded []string
}

var (
	genCmdRE   = regexp.MustCompile(`^bash gen\.sh (\d+)$`)
	genAnyRE   = regexp.MustCompile(`command="bash gen\.sh (\d+)"`)
	progressRE = regexp.MustCompile(`\[longsession progress: steps=(\d+) recall=(done|pending) unfold=(done|pending)\]`)
	recallRE   = regexp.MustCompile(`(?:^|[\s;:])recall_folded\(`)
	unfoldRE   = regexp.MustCompile(`(?:^|[\s;:])unfold\(`)
)

// progress is how far a context has got.
type progress struct {
	steps          int
	recall, unfold bool
}

func (p progress) marker() string {
	state := func(b bool) string {
		if b {
			return "done"
		}
		return "pending"
	}
	return fmt.Sprintf("[longsession progress: steps=%d recall=%s unfold=%s]", p.steps, state(p.recall), state(p.unfold))
}

// merge folds progress markers found in text into p.
func (p *progress) merge(text string) {
	for _, m := range progressRE.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		p.steps = max(p.steps, n)
		p.recall = p.recall || m[2] == "done"
		p.unfold = p.unfold || m[3] == "done"
	}
}

func (s *LongSession) steps() int {
	if s.Steps <= 0 {
		return 40
	}
	return s.Steps
}

// progressOf reads the progress of a tool-declaring request.
func progressOf(req *fakellm.Request) progress {
	var p progress
	for _, m := range req.Messages {
		if m.Role == "system" {
			continue
		}
		for _, tc := range m.ToolCalls {
			switch tc.Name {
			case "bash":
				var args struct {
					Command string `json:"command"`
				}
				if json.Unmarshal(tc.Arguments, &args) == nil {
					if sm := genCmdRE.FindStringSubmatch(args.Command); sm != nil {
						n, _ := strconv.Atoi(sm[1])
						p.steps = max(p.steps, n)
					}
				}
			case "recall_folded":
				p.recall = true
			case "unfold":
				p.unfold = true
			}
		}
		p.merge(m.Content)
	}
	return p
}

// Reply implements fakellm.Script.
func (s *LongSession) Reply(req *fakellm.Request) fakellm.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies++
	limit := s.MaxReplies
	if limit <= 0 {
		limit = 4*s.steps() + 20
	}
	if s.replies > limit {
		return fakellm.Reply{Text: fmt.Sprintf("LONGSESSION ABORTED: %d requests without finishing", s.replies-1)}
	}

	p := progressOf(req)
	if p.steps < s.steps() {
		i := p.steps + 1
		args, _ := json.Marshal(map[string]string{"command": GenCommand(i)})
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: GenCallID(i), Name: "bash", Arguments: args}}}
	}
	codes := FoldedCodes(req.Text())
	if !s.SkipRecall && !p.recall && len(codes) > 0 && req.HasTool("recall_folded") {
		code := codes[0]
		if !slices.Contains(s.recalled, code) {
			s.recalled = append(s.recalled, code)
		}
		args, _ := json.Marshal(map[string][]string{"codes": {code}})
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: RecallCallID, Name: "recall_folded", Arguments: args}}}
	}
	if !s.SkipUnfold && !p.unfold && len(codes) > 0 && req.HasTool("unfold") {
		code := codes[0]
		for _, c := range s.recalled {
			if slices.Contains(codes, c) {
				code = c
				break
			}
		}
		if !slices.Contains(s.unfolded, code) {
			s.unfolded = append(s.unfolded, code)
		}
		args, _ := json.Marshal(map[string][]string{"codes": {code}})
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: UnfoldCallID, Name: "unfold", Arguments: args}}}
	}
	final := s.Final
	if final == "" {
		final = fmt.Sprintf("FINAL: done after %d steps", s.steps())
	}
	return fakellm.Reply{Text: final}
}

// Summary implements fakellm.Summarizer: it answers Pi's compaction request
// with a short summary that carries a progress marker, read from the
// serialized conversation ("bash(command=\"bash gen.sh 7\")",
// "recall_folded(...)", "unfold(...)") and from any earlier marker.
func (s *LongSession) Summary(req *fakellm.Request) string {
	var p progress
	text := req.Text()
	for _, m := range genAnyRE.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		p.steps = max(p.steps, n)
	}
	p.recall = recallRE.MatchString(text)
	p.unfold = unfoldRE.MatchString(text)
	p.merge(text)
	var b strings.Builder
	b.WriteString("## Goal\nRun gen.sh step by step and report the failures.\n\n## Progress\n")
	fmt.Fprintf(&b, "- gen.sh steps 1..%d ran; each printed one ERROR line.\n\n", p.steps)
	b.WriteString(p.marker())
	b.WriteString("\n")
	return b.String()
}

// Recalled returns the codes the script passed to recall_folded, in order.
func (s *LongSession) Recalled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recalled)
}

// Unfolded returns the codes the script passed to unfold, in order.
func (s *LongSession) Unfolded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unfolded)
}
