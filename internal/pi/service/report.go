package service

import "github.com/contextfold/contextfold/internal/core/engine"

// ReportLimits are the lines /context-fold report draws for the running
// session, which its file does not record: the window of the last
// request, Pi's reserve for its model and the budget the engine folds to.
type ReportLimits struct {
	Window int `json:"window"` // 0 before the first request
	// Reserve is Pi's reserveTokens for the session's model; -1 when Pi's
	// compaction is off.
	Reserve int `json:"reserve"`
	Budget  int `json:"budget"`
}

func (s *Service) reportLimits() (*ReportLimits, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	reserve := ss.compaction.Reserve(ss.model)
	lim := &ReportLimits{Window: ss.window, Reserve: reserve, Budget: engine.Budget(ss.conf.Knobs, ss.window, reserve)}
	if !ss.compaction.For(ss.model).Enabled {
		lim.Reserve = -1
	}
	return lim, nil
}
