// Package piread reads a Pi session file into the report page's data: the
// model requests of the active branch with the usage and money Pi recorded
// for each, the fold events context-fold recorded among them, Pi's
// compactions, and the folded blocks, each located in the file to estimate
// what it masks.
package piread

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/contextfold/contextfold/internal/bench/htmlreport"
	"github.com/contextfold/contextfold/internal/core/compact"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/pi/ledger"
)

// CustomType is the custom entry type holding context-fold's engine
// entries in a Pi session (service.CustomType; the bench does not import
// the service).
const CustomType = "contextfold.fold"

// DefaultReserve is Pi's default compaction reserve (reserveTokens): Pi
// compacts once a request reaches the window less this.
const DefaultReserve = 16_384

// Limits are the lines the size chart draws. The session file does not
// record the model's window, so the caller names it (0: unknown, none
// drawn).
type Limits struct {
	Window int
	// Reserve is Pi's reserveTokens: it compacts at Window − Reserve; < 0
	// when Pi's compaction is off.
	Reserve int
	// Budget is context-fold's request budget; 0 computes it from Knobs
	// as the engine does.
	Budget int
	Knobs  policy.Knobs
}

// message is what a request's assistant message holds for the page.
type message struct {
	Role  string `json:"role"`
	Model string `json:"model"`
	Usage *struct {
		Input      int `json:"input"`
		Output     int `json:"output"`
		CacheRead  int `json:"cacheRead"`
		CacheWrite int `json:"cacheWrite"`
		Cost       struct {
			Input      float64 `json:"input"`
			Output     float64 `json:"output"`
			CacheRead  float64 `json:"cacheRead"`
			CacheWrite float64 `json:"cacheWrite"`
			Total      float64 `json:"total"`
		} `json:"cost"`
	} `json:"usage"`
}

// live is a folded block in context.
type live struct {
	block  int // index in Data.Blocks
	masked int
	at     int // its message's index in the branch; -1 when unknown
}

// Read reads the session file at path.
func Read(path string, lim Limits) (*htmlreport.Data, error) {
	led, err := ledger.ReadFile(path)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(path)
	d := &htmlreport.Data{Kind: "Pi session", ID: led.Header().ID, File: abs}
	if lim.Window > 0 {
		d.Window = lim.Window
		if lim.Reserve >= 0 && lim.Reserve < lim.Window {
			d.Threshold = lim.Window - lim.Reserve
		}
		d.Budget = lim.Budget
		if d.Budget <= 0 && lim.Knobs.BudgetFraction > 0 {
			d.Budget = engine.Budget(lim.Knobs, lim.Window, max(0, lim.Reserve))
		}
	}
	branch := led.Branch("")
	pos := map[string]int{}
	for i, e := range branch {
		if e.ID != "" {
			pos[e.ID] = i
		}
	}
	active := map[string]*live{}
	events := map[int]int{} // seq → index in d.Events
	models := map[string]int{}
	var sums [4][2]float64 // input, cacheWrite, cacheRead, output: tokens, money
	costKnown := false
	unreported := 0
	for _, e := range branch {
		switch {
		case e.Type == "message" && e.Message != nil:
			var m message
			if json.Unmarshal(e.Message, &m) != nil || m.Role != "assistant" || m.Usage == nil {
				continue
			}
			u := m.Usage
			if u.Input+u.CacheRead+u.CacheWrite+u.Output == 0 {
				// A request that failed before the provider counted it
				// (Pi records zeros): nothing was sent or billed.
				unreported++
				continue
			}
			r := htmlreport.Request{Input: u.Input, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Output: u.Output, Cost: u.Cost.Total}
			for _, l := range active {
				r.Masked += l.masked
			}
			d.Requests = append(d.Requests, r)
			models[m.Model]++
			for i, tc := range [4][2]float64{{float64(u.Input), u.Cost.Input}, {float64(u.CacheWrite), u.Cost.CacheWrite}, {float64(u.CacheRead), u.Cost.CacheRead}, {float64(u.Output), u.Cost.Output}} {
				sums[i][0] += tc[0]
				sums[i][1] += tc[1]
			}
			costKnown = costKnown || u.Cost.Total > 0
		case e.Type == "compaction":
			kind := "Pi's LLM summary"
			if strings.Contains(e.Summary, compact.Marker) {
				kind = "context-fold deterministic summary"
			}
			d.Compactions = append(d.Compactions, htmlreport.Compaction{Request: len(d.Requests) + 1, Kind: kind})
			kept, ok := pos[e.FirstKeptEntryID]
			for id, l := range active {
				if !ok || l.at < kept {
					d.Blocks[l.block].State = "compacted away"
					delete(active, id)
				}
			}
		case e.Type == "custom" && e.CustomType == CustomType:
			var en engine.Entry
			if json.Unmarshal(e.Data, &en) != nil {
				continue
			}
			next := len(d.Requests) + 1
			switch en.Kind {
			case engine.KindFold:
				ev := htmlreport.Event{Seq: en.Seq, Trigger: en.Trigger, Request: next}
				for _, rec := range en.Folds {
					if rec.Digest == "" {
						continue // recorded at compaction, never folded
					}
					f, err := led.Locate(rec.ID, rec.SHA256)
					b := htmlreport.Block{Code: rec.Code, Tool: rec.Tool, Seq: en.Seq, Request: next, Bytes: rec.Bytes, State: "text not in the file"}
					l := &live{at: -1}
					if err == nil {
						b = htmlreport.NewBlock(rec.Code, rec.Tool, en.Seq, next, f.Text, rec.Digest)
						b.State = "folded"
						l.masked = max(0, b.Tokens-b.DigestTokens)
						if p, ok := pos[f.EntryID]; ok {
							l.at = p
						}
					}
					l.block = len(d.Blocks)
					d.Blocks = append(d.Blocks, b)
					active[rec.ID] = l
					ev.Blocks++
					ev.Masked += l.masked
				}
				if ev.Blocks > 0 {
					events[en.Seq] = len(d.Events)
					d.Events = append(d.Events, ev)
				}
			case engine.KindUnfold:
				for _, id := range en.IDs {
					if l, ok := active[id]; ok {
						d.Blocks[l.block].State = "unfolded"
						delete(active, id)
					}
				}
			case engine.KindVoid:
				if i, ok := events[en.Seq]; ok {
					d.Events = append(d.Events[:i], d.Events[i+1:]...)
					delete(events, en.Seq)
					for id, l := range active {
						if d.Blocks[l.block].Seq == en.Seq {
							d.Blocks[l.block].State = "void (never sent)"
							delete(active, id)
						}
					}
				}
			}
		}
	}
	switch {
	case len(d.Requests) == 0:
		d.RequestsNote = "the session file holds no assistant message with usage"
	case unreported > 0:
		d.RequestsNote = fmt.Sprintf("%d more responses report no tokens (failed before the provider counted them) and are left out", unreported)
	}
	// An event after the last request applied to none yet.
	for i := range d.Events {
		if d.Events[i].Request > len(d.Requests) {
			d.Events[i].Request = 0
		}
	}
	for i := range d.Blocks {
		if d.Blocks[i].Request > len(d.Requests) {
			d.Blocks[i].Request = 0
		}
	}
	for i := range d.Compactions {
		if d.Compactions[i].Request > len(d.Requests) {
			d.Compactions[i].Request = 0
		}
	}
	d.Model = topModel(models)
	d.Prices = prices(sums, costKnown, d.Model)
	if d.Prices != nil && costKnown {
		for i := range d.Requests {
			d.Requests[i].CostKnown = true
		}
	}
	switch {
	case lim.Window <= 0:
		d.LimitsNote = "the window was not given (contextfold report -window), so no line is drawn"
	default:
		threshold := fmt.Sprintf("compaction threshold = window − Pi's reserveTokens %d", lim.Reserve)
		if lim.Reserve < 0 {
			threshold = "Pi's compaction is off: no threshold"
		}
		budget := fmt.Sprintf("fold budget %d as given (-budget)", lim.Budget)
		if lim.Budget <= 0 {
			budget = fmt.Sprintf("fold budget from context-fold's settings (%.2f × window, at most %d, and %d under the threshold)", lim.Knobs.BudgetFraction, lim.Knobs.BudgetCap, engine.ReplyMargin)
		}
		d.LimitsNote = fmt.Sprintf("window %d as given (-window); %s; %s", lim.Window, threshold, budget)
	}
	return d, nil
}

func topModel(models map[string]int) string {
	names := make([]string, 0, len(models))
	for m := range models {
		names = append(names, m)
	}
	sort.Slice(names, func(i, j int) bool {
		if models[names[i]] != models[names[j]] {
			return models[names[i]] > models[names[j]]
		}
		return names[i] < names[j]
	})
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// prices derives the per-million prices from the money Pi recorded for
// each kind of token; a kind the session never used takes the table's
// ratio to the input price. Without money recorded, the table applies.
func prices(sums [4][2]float64, known bool, model string) *htmlreport.Prices {
	if !known {
		p := htmlreport.TablePrices
		p.Source += " (the session records no money)"
		return &p
	}
	t := htmlreport.TablePrices
	ratio := [4]float64{1, t.CacheWrite / t.Input, t.CacheRead / t.Input, t.Output / t.Input}
	var per [4]float64
	var assumed []string
	names := [4]string{"input", "cache write", "cache read", "output"}
	for i, s := range sums {
		if s[0] > 0 && s[1] > 0 {
			per[i] = s[1] / s[0] * 1e6
		}
	}
	base := per[0]
	if base == 0 {
		for i := 1; i < 4; i++ {
			if per[i] > 0 {
				base = per[i] / ratio[i]
				break
			}
		}
	}
	for i := range per {
		if per[i] == 0 {
			per[i] = base * ratio[i]
			assumed = append(assumed, names[i])
		}
	}
	src := "from the money the session recorded"
	if model != "" {
		src += " (" + model + ")"
	}
	if len(assumed) > 0 {
		src += "; " + strings.Join(assumed, ", ") + " not recorded: Claude Sonnet 4's ratio to the input price assumed"
	}
	return &htmlreport.Prices{Source: src, Input: per[0], CacheWrite: per[1], CacheRead: per[2], Output: per[3]}
}
