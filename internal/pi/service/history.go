package service

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/parallel"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/core/telemetry"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// foldEvent is one fold event as the status lists it: its number, the
// session's request that carried it (1-based), its blocks and the tokens
// they keep out of each request.
type foldEvent struct {
	Seq     int `json:"seq"`
	Request int `json:"request"`
	Blocks  int `json:"blocks"`
	Masked  int `json:"masked"`
}

// recentEvents is how many fold events the status lists.
const recentEvents = 5

// savedOf is what folding rec keeps out of each request: the block's
// tokens (from its recorded size until the adapter sends it again) less
// its digest's.
func savedOf(ss *session, rec *registry.Record) int {
	d := ss.eng.Config().Cost(rec.Digest)
	if b, ok := ss.eng.Live(rec.ID); ok {
		return max(0, b.Tokens-d)
	}
	return max(0, tokens.EstimateUnits(rec.Bytes)+tokens.BlockOverhead-d)
}

// seedHistory replays the active branch of a resumed session's file into
// the telemetry: every completed response's usage, in order, with the fold
// and unfold entries between them, so the cache figures, what folds saved
// and what the session spent survive a restart (Pi's own footer totals the
// same file). It also lists the branch's fold events with the request that
// carried each, and counts the session's requests.
func (s *Service) seedHistory(ss *session) {
	if ss.file == "" {
		return
	}
	led, err := s.ledgerFor(ss, nil)
	if err != nil {
		return
	}
	branch := led.Branch("")
	// Reading a message is pure: over the cores, then applied oldest first.
	acts := make([]*activity, len(branch))
	parallel.For(len(branch), 256, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			e := &branch[i]
			if e.Type != "message" || e.Message == nil {
				continue
			}
			m, err := readActivity(e.Message)
			if err != nil || m.Role != "assistant" {
				continue
			}
			acts[i] = &m
		}
	})
	tm := ss.tm
	masked := map[string]int{} // tokens each folded block keeps out, as the walk stands
	sum, requests := 0, 0
	seen := map[int]bool{}
	for i := range branch {
		e := &branch[i]
		if m := acts[i]; m != nil {
			requests++
			if m.Usage == nil || m.StopReason == "error" || m.StopReason == "aborted" {
				continue
			}
			u := *m.Usage
			u.Provider, u.Model, u.At, u.Stop = m.Provider, m.Model, int64(m.Timestamp), m.StopReason
			tm.MaskedNow = sum
			tm.Observe(u)
			tm.Activity(m.Provider, m.Model, int64(m.Timestamp), u.Prompt())
			continue
		}
		if e.Type != "custom" || e.CustomType != CustomType || e.Data == nil {
			continue
		}
		ens, _ := decodeEntries([]json.RawMessage{e.Data})
		for _, en := range ens {
			switch en.Kind {
			case engine.KindFold:
				// Only the events Replay accepted, each once.
				l, ok := ss.eng.Layer(en.Seq)
				if !ok || l == nil || len(l.Entries) == 0 || seen[en.Seq] {
					continue
				}
				seen[en.Seq] = true
				n := 0
				for _, le := range l.Entries {
					if rec, ok := ss.eng.Registry().Get(le.ID); ok {
						masked[le.ID] = savedOf(ss, rec)
						n += masked[le.ID]
					}
				}
				tm.MaskedNow = sum
				tm.NoteFold(n)
				sum += n
				ss.events = append(ss.events, foldEvent{Seq: en.Seq, Request: requests + 1, Blocks: len(l.Entries), Masked: n})
			case engine.KindUnfold:
				for _, id := range en.IDs {
					sum -= masked[id]
					delete(masked, id)
				}
			}
		}
	}
	ss.requests = requests
}

// money formats an amount in the session's currency as Pi's footer does.
func money(v float64) string { return fmt.Sprintf("$%.3f", v) }

// moneyLine says what the session spent (Pi's figure) and what folding
// saved, as an estimate, or "" before any priced usage.
func moneyLine(tm *telemetry.Telemetry) string {
	if tm.FoldEvents == 0 || tm.SavedTotal == 0 {
		if tm.Spent == 0 {
			return ""
		}
		return fmt.Sprintf("cost: the responses so far cost %s at Pi's prices", money(tm.Spent))
	}
	if tm.PricedResponses == 0 {
		return fmt.Sprintf("cost: the responses so far cost %s at Pi's prices; what folds saved is not priced: the responses carry no prices (Pi lists none for this model)", money(tm.Spent))
	}
	net := tm.SavedMoney - tm.ExtraWrites
	verdict := "saved ≈" + money(net)
	if net < 0 {
		verdict = "cost ≈" + money(-net) + " more"
	}
	return fmt.Sprintf("cost: the responses so far cost %s at Pi's prices · folding %s (estimate: %s for the %s tok not sent, each at the price its request paid for prompt-prefix tokens, less %s of cache writes the fold events caused above reading back)",
		money(tm.Spent), verdict, money(tm.SavedMoney), telemetry.K(int(tm.SavedTotal)), money(tm.ExtraWrites))
}

// eventLines list the newest fold events.
func eventLines(ss *session) []string {
	if len(ss.events) == 0 {
		return nil
	}
	from := max(0, len(ss.events)-recentEvents)
	out := []string{fmt.Sprintf("recent fold events (%d of %d):", len(ss.events)-from, len(ss.events))}
	for _, ev := range ss.events[from:] {
		out = append(out, fmt.Sprintf("  #%d at request %d: %s, −%s tok a request", ev.Seq, ev.Request, recall.Count(ev.Blocks, "block", "blocks"), telemetry.K(ev.Masked)))
	}
	return out
}

// eventNotice is the short notice of a fold event.
func eventNotice(ev foldEvent) string {
	return fmt.Sprintf("context-fold: folded %s, −%s tok a request (fold event %d)", recall.Count(ev.Blocks, "block", "blocks"), telemetry.K(ev.Masked), ev.Seq)
}

// FoldedBlock is one block folded now, as the menu lists it.
type FoldedBlock struct {
	Code string `json:"code"`
	Tool string `json:"tool"`
	// Age is how many of the session's requests ago its fold event was (0:
	// this request), -1 when unknown.
	Age        int    `json:"age"`
	Tokens     int    `json:"tokens"` // the block's size
	Saved      int    `json:"saved"`  // tokens kept out of each request
	ErrorLines int    `json:"errorLines"`
	Row        string `json:"row"`
}

// FoldedView lists the blocks folded now, newest event first.
type FoldedView struct {
	Blocks []FoldedBlock `json:"blocks"`
}

// keptLines counts the lines a digest keeps verbatim (its error and
// warning lines): every line after its header but the "… N more" counts.
func keptLines(digest string) int {
	lines := strings.Split(digest, "\n")
	n := 0
	for _, l := range lines[1:] {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "…") {
			n++
		}
	}
	return n
}

func (s *Service) folded() (*FoldedView, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	return &FoldedView{Blocks: foldedBlocks(ss)}, nil
}

func foldedBlocks(ss *session) []FoldedBlock {
	at := map[int]int{}
	for _, ev := range ss.events {
		at[ev.Seq] = ev.Request
	}
	out := []FoldedBlock{}
	all := ss.eng.Registry().All()
	for i := len(all) - 1; i >= 0; i-- {
		rec := all[i]
		if rec.Digest == "" || !ss.eng.Frozen(rec.ID) {
			continue
		}
		tool := rec.Tool
		if tool == "" {
			tool = rec.Kind
		}
		saved := savedOf(ss, rec)
		b := FoldedBlock{Code: rec.Code, Tool: tool, Age: -1, Tokens: saved + ss.eng.Config().Cost(rec.Digest), Saved: saved, ErrorLines: keptLines(rec.Digest)}
		age := "age unknown"
		if r, ok := at[rec.Seq]; ok {
			b.Age = max(0, ss.requests-r)
			age = fmt.Sprintf("folded %d requests ago", b.Age)
			if b.Age == 0 {
				age = "folded by the latest request"
			}
		}
		b.Row = fmt.Sprintf("%s · %s · %s · %s tok (−%s a request) · error lines kept: %d", rec.Code, tool, age, telemetry.K(b.Tokens), telemetry.K(saved), b.ErrorLines)
		out = append(out, b)
	}
	return out
}

// ShowParams name one folded block for the user to read.
type ShowParams struct {
	Code string `json:"code"`
	// Entries are the session's entries when it has no file (as recall's).
	Entries string `json:"entries,omitempty"`
}

// show reads a folded block back for the user, as recall_folded does
// (bounded, verified), without counting it as the model's recall.
func (s *Service) show(p ShowParams) (*ToolResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	led, ledErr := s.ledgerFor(ss, []byte(p.Entries))
	stores := []recall.Store{sessionStore{ss, led, ledErr}}
	rep := recall.Answer(stores, recall.Request{Codes: []string{p.Code}})
	return &ToolResult{Text: rep.Text, IsError: rep.IsError}, nil
}

// foldedShown is how many folded blocks the status lists; the menu lists all.
const foldedShown = 10

// foldedLines list the blocks folded now, newest first.
func foldedLines(bs []FoldedBlock) []string {
	if len(bs) == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("folded now: %s (code · tool · age · size · kept out of each request · error lines kept; recall or unfold one from the /context-fold menu)", recall.Count(len(bs), "block", "blocks"))}
	for _, b := range bs[:min(len(bs), foldedShown)] {
		out = append(out, "  "+b.Row)
	}
	if len(bs) > foldedShown {
		out = append(out, fmt.Sprintf("  … %d more in the /context-fold menu's Folded blocks", len(bs)-foldedShown))
	}
	return out
}

// footerLegend explains the footer's fields.
const footerLegend = "footer: ×N fold events · ~N masked: tokens the folds keep out of every request · fold at N%: usage the first fold waits for · next A/B: foldable tokens against the batch the next fold waits for · ≈$N saved: the cost line's estimate, net, while folding is ahead"
