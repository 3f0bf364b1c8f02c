// Package indexfile stores the seed index: one JSON record per fold event in
// <sessionDir>/context-fold/<sessionId>/seed-index.jsonl, append-only.
//
// A record whose event did not take effect is retracted by appending a void
// line for its seq, never by editing the file. A line torn by a failed
// write (a full disk) never takes effect and never costs the line after it
// (package jsonl). A session without a
// directory (Pi's --no-session) keeps its index in memory: nothing is ever
// written into the user's working tree (docs/EDGES.md #22).
package indexfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/seedindex"
	"github.com/contextfold/contextfold/internal/store/jsonl"
)

// Record is one line of the file: a seed-index record with its envelope.
type Record struct {
	seedindex.Record
	Session string `json:"session,omitempty"`
	At      string `json:"at,omitempty"`
}

type voidLine struct {
	V    int    `json:"v"`
	Kind string `json:"kind"` // "fold-retract"
	Seq  int    `json:"seq"`
	At   string `json:"at,omitempty"`
}

// Dir returns the directory of a session's engine files, or "" when the
// session has no directory.
func Dir(sessionDir, sessionID string) string {
	if sessionDir == "" || sessionID == "" {
		return ""
	}
	return filepath.Join(sessionDir, "context-fold", sessionID)
}

// Store appends to one session's seed index.
type Store struct {
	mu   sync.Mutex
	path string   // "" keeps lines in memory
	mem  [][]byte // in-memory lines when path is ""
}

// Open returns the store in dir ("" for memory only). The file is created on
// the first append.
func Open(dir string) *Store {
	if dir == "" {
		return &Store{}
	}
	return &Store{path: filepath.Join(dir, "seed-index.jsonl")}
}

// Path returns the file path, or "" for an in-memory store.
func (s *Store) Path() string { return s.path }

// Append durably writes one record: the whole line is in the file before
// Append returns nil. Like Pi's own session file it is not fsynced: it
// survives a crash of any process, not of the machine.
func (s *Store) Append(r Record) error {
	line, err := rawjson.Marshal(r)
	if err != nil {
		return fmt.Errorf("seed index: encode: %w", err)
	}
	return s.appendLine(line)
}

// Void retracts the record with seq.
func (s *Store) Void(seq int, at string) error {
	line, _ := rawjson.Marshal(voidLine{V: 1, Kind: "fold-retract", Seq: seq, At: at})
	return s.appendLine(line)
}

func (s *Store) appendLine(line []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == "" {
		s.mem = append(s.mem, append(line, '\n'))
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("seed index: %w", err)
	}
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("seed index: %w", err)
	}
	if _, err := jsonl.Append(f, append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("seed index: write %s: %w", s.path, err)
	}
	return f.Close()
}

// Records returns the effective records in file order: lines that do not
// parse are skipped, and a void line removes every earlier record with its seq.
func (s *Store) Records() ([]Record, error) {
	rs, _, err := s.Read()
	return rs, err
}

// Read returns the effective records and the sequence floor: the highest seq
// on any line, retracted ones included, so a new event never reuses it.
func (s *Store) Read() ([]Record, int, error) {
	s.mu.Lock()
	var data []byte
	if s.path == "" {
		data = bytes.Join(s.mem, nil)
	} else {
		var err error
		data, err = os.ReadFile(s.path)
		if errors.Is(err, fs.ErrNotExist) {
			s.mu.Unlock()
			return nil, 0, nil
		}
		if err != nil {
			s.mu.Unlock()
			return nil, 0, fmt.Errorf("seed index: %w", err)
		}
	}
	s.mu.Unlock()
	rs, floor := Parse(data)
	return rs, floor, nil
}

// Floor returns Read's sequence floor without decoding the records: what a
// session needs at open.
func (s *Store) Floor() (int, error) {
	s.mu.Lock()
	var data []byte
	if s.path == "" {
		data = bytes.Join(s.mem, nil)
	} else {
		var err error
		data, err = os.ReadFile(s.path)
		if errors.Is(err, fs.ErrNotExist) {
			s.mu.Unlock()
			return 0, nil
		}
		if err != nil {
			s.mu.Unlock()
			return 0, fmt.Errorf("seed index: %w", err)
		}
	}
	s.mu.Unlock()
	return ParseFloor(data), nil
}

// ParseFloor is Parse's floor alone. It reads each line's "seq" in place and
// decodes a line with encoding/json only when the fast reading cannot be
// sure to agree with it (keys in another case, a seq that is not a plain
// integer, a kind that is not a string).
func ParseFloor(data []byte) (floor int) {
	// A torn line counts too: a number it claimed must not come back.
	jsonl.Scan(data, lineStart, func(l jsonl.Line) {
		seq, ok, sure := lineSeq(l.Bytes)
		if !sure {
			var head struct {
				Kind string `json:"kind"`
				Seq  int    `json:"seq"`
			}
			ok = json.Unmarshal(l.Bytes, &head) == nil
			seq = head.Seq
		}
		if ok {
			floor = max(floor, seq)
		}
	})
	return floor
}

// lineStart is how every line begins: "v" is the first field of a record
// and of a void line. A damaged line is read from the last place a line
// begins (jsonl.Recover).
var lineStart = []byte(`{"v":`)

// lineSeq reads what json.Unmarshal into {Kind string; Seq int} would:
// the seq and whether the line decodes. sure is false when it cannot tell.
func lineSeq(line []byte) (seq int, ok, sure bool) {
	ms, err := rawjson.Object(line)
	if err != nil {
		return 0, false, false
	}
	for _, m := range ms {
		switch m.Key {
		case "seq":
			if rawjson.IsNull(m.Value) {
				continue
			}
			n, ok := rawjson.PlainInt(m.Value)
			if !ok {
				return 0, false, false
			}
			seq = n
		case "kind":
			if !rawjson.IsString(m.Value) && !rawjson.IsNull(m.Value) {
				return 0, false, false
			}
		default:
			if strings.EqualFold(m.Key, "seq") || strings.EqualFold(m.Key, "kind") {
				return 0, false, false
			}
		}
	}
	return seq, true, true
}

// Parse reads seed-index lines: the effective records and the sequence floor.
// Strings are decoded by encoding/json (a lone surrogate reads as U+FFFD);
// the index is for rendering and search, never for verification.
func Parse(data []byte) (out []Record, floor int) {
	jsonl.Scan(data, lineStart, func(l jsonl.Line) {
		var head struct {
			Kind string `json:"kind"`
			Seq  int    `json:"seq"`
		}
		if json.Unmarshal(l.Bytes, &head) != nil {
			return
		}
		floor = max(floor, head.Seq)
		if !l.Ended {
			return // a write cut off: never in effect
		}
		switch head.Kind {
		case "fold-index":
			var r Record
			if json.Unmarshal(l.Bytes, &r) == nil && r.Spans != nil {
				out = append(out, r)
			}
		case "fold-retract":
			kept := out[:0]
			for _, r := range out {
				if r.Seq != head.Seq {
					kept = append(kept, r)
				}
			}
			out = kept
		}
	})
	return out, floor
}

// MaxSeq returns the highest seq among records (0 when none).
func MaxSeq(rs []Record) int {
	m := 0
	for _, r := range rs {
		m = max(m, r.Seq)
	}
	return m
}
