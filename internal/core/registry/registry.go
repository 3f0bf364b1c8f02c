// Package registry is the fold registry: for every folded block, its durable
// id, fold code, extent and the sha256 of its exact text at fold time.
//
// The registry holds metadata only, never content. Recall finds a block's
// bytes again in its host's append-only store (Pi's session file, the
// proxy's conversation record) by durable id and verifies them against the
// recorded sha256. Codes are unique within a registry: a
// second id hashing to a taken code is a collision and is refused.
package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// Record describes one folded block.
type Record struct {
	ID      string `json:"id"`
	Code    string `json:"code"`
	Seq     int    `json:"seq"`              // the fold event (layer) that folded it
	Bytes   int    `json:"bytes"`            // UTF-8 length of the text
	Lines   int    `json:"lines"`            // newline-separated lines of the text
	SHA256  string `json:"sha256,omitempty"` // hex sha256 of the text; empty on legacy records
	Tool    string `json:"tool,omitempty"`
	Kind    string `json:"kind"`
	IsError bool   `json:"isError,omitempty"`
	Turn    int    `json:"turn"`
	// FullOutputPath is the tool's own full-output file, when it had one.
	FullOutputPath string `json:"fullOutputPath,omitempty"`
	// Digest is the exact substituted text (the frozen bytes).
	Digest string `json:"digest,omitempty"`
	// Compacted marks a record written at hard compaction for a block that
	// left live history without having folded.
	Compacted bool `json:"compacted,omitempty"`
}

// Sum returns the hex sha256 of text.
func Sum(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:])
}

// Extent returns the byte and line counts recorded for text.
func Extent(text string) (bytes, lines int) {
	if text == "" {
		return 0, 0
	}
	return len(text), strings.Count(text, "\n") + 1
}

// Registry indexes records by id and by code.
type Registry struct {
	byID   map[string]*Record
	byCode map[string]*Record
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{byID: make(map[string]*Record), byCode: make(map[string]*Record)}
}

// Len returns the number of records.
func (r *Registry) Len() int { return len(r.byID) }

// Get returns the record of a block id.
func (r *Registry) Get(id string) (*Record, bool) {
	rec, ok := r.byID[id]
	return rec, ok
}

// ByCode returns the record holding a code.
func (r *Registry) ByCode(code string) (*Record, bool) {
	rec, ok := r.byCode[code]
	return rec, ok
}

// Collides reports whether code is held by a different id.
func (r *Registry) Collides(id, code string) bool {
	rec, ok := r.byCode[code]
	return ok && rec.ID != id
}

// Add stores rec. It returns false, storing nothing, when rec's code is held
// by a different id. Re-adding an id replaces its record.
func (r *Registry) Add(rec Record) bool {
	if r.Collides(rec.ID, rec.Code) {
		return false
	}
	if old, ok := r.byID[rec.ID]; ok && old.Code != rec.Code {
		delete(r.byCode, old.Code)
	}
	p := &rec
	r.byID[rec.ID] = p
	r.byCode[rec.Code] = p
	return true
}

// All returns every record ordered by seq, then id.
func (r *Registry) All() []*Record {
	out := make([]*Record, 0, len(r.byID))
	for _, rec := range r.byID {
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seq != out[j].Seq {
			return out[i].Seq < out[j].Seq
		}
		return out[i].ID < out[j].ID
	})
	return out
}
