package service

import (
	"context"

	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/recall"
)

func marshalString(s string) ([]byte, error) { return rawjson.Quote(nil, s), nil }

// UnfoldParams name the codes to release.
// Its schema declares codes only; code, recall_folded's single form, is
// taken too, for a model that writes it.
type UnfoldParams struct {
	Code  string   `json:"code,omitempty"`
	Codes []string `json:"codes"`
}

// ToolResult is a tool's answer: the text the model reads and details for Pi.
type ToolResult struct {
	Text    string `json:"text"`
	Details any    `json:"details"`
	IsError bool   `json:"isError,omitempty"`
}

// RecallParams are recall_folded's arguments plus, for a session without a
// file, the session's entries.
type RecallParams struct {
	Code   string   `json:"code,omitempty"`
	Codes  []string `json:"codes,omitempty"`
	Grep   string   `json:"grep,omitempty"`
	Lines  string   `json:"lines,omitempty"`
	Chars  string   `json:"chars,omitempty"`
	Search string   `json:"search,omitempty"`
	// Entries are Pi's session entries as JSON lines, sent only when the
	// session has no file (--no-session).
	Entries string `json:"entries,omitempty"`
}

func (s *Service) unfold(ctx context.Context, p UnfoldParams) (*ToolResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	codes := recall.JoinCodes(p.Code, p.Codes)
	res, err := ss.eng.Unfold(codes, &journal{s: s, ss: ss, ctx: ctx})
	if err != nil {
		return &ToolResult{Text: "unfold failed: " + err.Error(), IsError: true}, nil
	}
	ss.tm.MaskedNow = foldsOf(ss).masked
	return renderUnfold(ss, codes, res), nil
}
