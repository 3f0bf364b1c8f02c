package service

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/compact"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/pi/indexfile"
	"github.com/contextfold/contextfold/internal/pi/ledger"
)

// SeedHeading starts every handoff seed; ParentPrefix names the parent
// session file inside it, so a session started from the seed can resolve the
// parent's fold codes. compact writes and reads the seed's layout.
const (
	SeedHeading  = compact.SeedHeading
	ParentPrefix = compact.ParentPrefix
)

// HandoffParams ask for a handoff seed.
type HandoffParams struct {
	Goal string `json:"goal"`
	// Leaf is the active branch's leaf entry id ("" for the file's last).
	Leaf string `json:"leaf,omitempty"`
	// Entries are the session's entries (JSON lines) when it has no file.
	Entries string `json:"entries,omitempty"`
}

// HandoffResult is the written seed, or, when the session has no messages
// yet, Empty with Text saying so (an answer, not a failure: nothing is
// written).
type HandoffResult struct {
	Path  string `json:"path,omitempty"`
	Seed  string `json:"seed,omitempty"`
	Empty bool   `json:"empty,omitempty"`
	Text  string `json:"text,omitempty"`
	// Temporary is set when the session has no directory and the seed was
	// written to the system's temporary directory instead.
	Temporary bool `json:"temporary,omitempty"`
}

// nothingYet answers a handoff of a session without messages.
const nothingYet = "nothing to hand off yet: this session has no messages"

func (s *Service) handoff(p HandoffParams) (*HandoffResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	empty := &HandoffResult{Empty: true, Text: nothingYet}
	// Pi writes the session file with the first assistant message, and a
	// --no-session session has no entries before the first message.
	if ss.file == "" && strings.TrimSpace(p.Entries) == "" {
		return empty, nil
	}
	led, err := s.ledgerFor(ss, []byte(p.Entries))
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	var msgs [][]byte
	for _, e := range led.Branch(p.Leaf) {
		if e.Type == "message" && e.Message != nil {
			msgs = append(msgs, e.Message)
		}
	}
	if len(msgs) == 0 {
		return empty, nil
	}
	tr := ss.eng.Linearize(msgs)
	codes := map[string]string{}
	for _, rec := range ss.eng.Registry().All() {
		codes[rec.ID] = rec.Code
	}
	seed := compact.Seed(p.Goal, ss.file, tr.Blocks(), codes)
	res := &HandoffResult{Seed: seed}
	dir := indexfile.Dir(ss.dir, ss.id)
	if dir == "" {
		// No session directory (--no-session): never write into the user's
		// tree (docs/EDGES.md #22).
		dir, res.Temporary = filepath.Join(os.TempDir(), "context-fold", ss.id), true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	if res.Path, err = writeNew(dir, "handoff-"+ss.id, seed); err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	return res, nil
}

// writeNew writes text to the first of base.md, base-2.md, base-3.md, … in
// dir that does not exist yet, and returns its path: a later handoff of the
// same session keeps every earlier seed (a fresh session may have started
// from it), and the numbering has no clock in it.
func writeNew(dir, base, text string) (string, error) {
	for n := 1; ; n++ {
		name := base + ".md"
		if n > 1 {
			name = fmt.Sprintf("%s-%d.md", base, n)
		}
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(p)
			return "", err
		}
		return p, nil
	}
}

// parent is the session a handoff seed came from: its ledger and its fold
// records by code.
type parent struct {
	file  string
	led   *ledger.Ledger
	codes map[string]registry.Record
	err   error
}

// parentFor finds the handoff seed in this session (the first user message
// that starts with SeedHeading) and opens the parent session it names.
func (s *Service) parentFor(ss *session, led *ledger.Ledger) *parent {
	if ss.parent != nil || led == nil {
		return ss.parent
	}
	for _, e := range led.Messages() {
		tr := block.Linearize([][]byte{e.Message})
		bs := tr.Blocks()
		if len(bs) == 0 || bs[0].Kind != block.User {
			continue
		}
		text := bs[0].Text
		if !strings.HasPrefix(text, SeedHeading) {
			return nil // only the session's first user message can be a seed
		}
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			if f, ok := strings.CutPrefix(sc.Text(), ParentPrefix); ok {
				ss.parent = openParent(strings.TrimSpace(f))
				return ss.parent
			}
		}
		return nil
	}
	return nil
}

func openParent(file string) *parent {
	p := &parent{file: file, codes: map[string]registry.Record{}}
	p.led, p.err = ledger.ReadFile(file)
	if p.err != nil {
		return p
	}
	var raws []json.RawMessage
	for _, e := range p.led.Custom(CustomType) {
		raws = append(raws, e.Data)
	}
	entries, _ := decodeEntries(raws)
	e := engine.New(engine.Config{})
	e.Replay(entries)
	for _, rec := range e.Registry().All() {
		p.codes[rec.Code] = *rec
	}
	return p
}
