package service

import (
	"strings"

	"github.com/contextfold/contextfold/internal/engine"
	"github.com/contextfold/contextfold/internal/protocol"
)

// TEMPORARY until internal/recall lands.
func renderUnfold(raw []string, res []engine.UnfoldResult) *ToolResult {
	var b strings.Builder
	n := 0
	for _, r := range res {
		b.WriteString(string(r.Status) + " " + r.Code + "\n")
		if r.Status == engine.Released {
			n++
		}
	}
	return &ToolResult{Text: b.String(), Details: res}
}

func (s *Service) recall(p RecallParams) (*ToolResult, error) {
	return nil, &protocol.Error{Code: protocol.CodeInternal, Message: "recall not ready"}
}
