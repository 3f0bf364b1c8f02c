package block

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// DupID is the durable id of a block whose anchor id another block took
// first: the anchor, "#" and the first 8 hex digits of the sha256 of the
// block's text. It depends only on the block, so the same block gets the
// same id in every request and in the session file (see BaseID), wherever
// the block that took the anchor went.
func DupID(id, text string) string {
	h := sha256.Sum256([]byte(text))
	return id + "#" + hex.EncodeToString(h[:4])
}

// BaseID splits an id DupID made into its anchor id and the sha256 prefix
// of its text; ok is false for any other id.
func BaseID(id string) (base, sum string, ok bool) {
	i := strings.LastIndexByte(id, '#')
	if i < 0 || len(id)-i != 9 || !Durable(id[:i]) {
		return "", "", false
	}
	for _, c := range id[i+1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", "", false
		}
	}
	return id[:i], id[i+1:], true
}

// Transcript is an ordered message list linearized into blocks. It grows by
// appending and shrinks by truncating, so an engine can follow Pi's append-only
// context and resynchronise from the first message that differs.
//
// A durable id belongs to the first block that produced it. A later tool
// result or thinking part with the same id (a local model server numbers
// its tool calls call_1, call_2, … afresh in every response) gets DupID's
// id, anchored on its own content, so it folds under a code of its own;
// when that id is taken too (the same content again), and for any other
// repeated id (two user messages in one millisecond), a block gets the
// positional id "m<i>:<id>" and never folds. Appending never changes an earlier block's id, turn or
// order.
type Transcript struct {
	msgs   []Message
	blocks []Block
	first  []int          // first[i] is the index in blocks of message i's first block
	turns  []int          // turns[i] is the turn count after message i
	owner  map[string]int // durable id → index in blocks
}

// NewTranscript returns an empty transcript.
func NewTranscript() *Transcript {
	return &Transcript{owner: make(map[string]int)}
}

// Len returns the number of messages.
func (t *Transcript) Len() int { return len(t.msgs) }

// Message returns message i.
func (t *Transcript) Message(i int) *Message { return &t.msgs[i] }

// Blocks returns every block in order. The slice must not be modified.
func (t *Transcript) Blocks() []Block { return t.blocks }

// MessageBlocks returns the blocks of message i.
func (t *Transcript) MessageBlocks(i int) []Block {
	end := len(t.blocks)
	if i+1 < len(t.first) {
		end = t.first[i+1]
	}
	return t.blocks[t.first[i]:end]
}

// Lookup returns the block that owns a durable id.
func (t *Transcript) Lookup(id string) (*Block, bool) {
	k, ok := t.owner[id]
	if !ok {
		return nil, false
	}
	return &t.blocks[k], true
}

// Truncate keeps the first n messages.
func (t *Transcript) Truncate(n int) {
	if n >= len(t.msgs) {
		return
	}
	if n < 0 {
		n = 0
	}
	cut := len(t.blocks)
	if n < len(t.first) {
		cut = t.first[n]
	}
	for k := cut; k < len(t.blocks); k++ {
		if o, ok := t.owner[t.blocks[k].ID]; ok && o == k {
			delete(t.owner, t.blocks[k].ID)
		}
	}
	clear(t.blocks[cut:])
	t.blocks = t.blocks[:cut]
	clear(t.msgs[n:])
	t.msgs = t.msgs[:n]
	t.first = t.first[:n]
	t.turns = t.turns[:n]
}

// Append decodes raw as the next message and links its blocks.
func (t *Transcript) Append(raw []byte) *Message {
	return t.AppendDecoded(Decode(raw, len(t.msgs)))
}

// AppendDecoded links m, which Decode returned for message index Len(),
// as the next message. Decoding is pure, so callers may decode many
// messages concurrently and link them in order.
func (t *Transcript) AppendDecoded(m Message) *Message {
	i := len(t.msgs)
	turn := 0
	if i > 0 {
		turn = t.turns[i-1]
	}
	if m.Role == "user" {
		turn++
	}
	t.first = append(t.first, len(t.blocks))
	for _, b := range m.Blocks {
		b.Turn = turn
		b.Order = len(t.blocks)
		if Durable(b.ID) {
			if _, taken := t.owner[b.ID]; taken && (b.Kind == ToolResult || b.Kind == Thinking) {
				b.ID = DupID(b.ID, b.Text)
			}
			if _, taken := t.owner[b.ID]; taken {
				b.ID = positional(i, b.ID)
			} else {
				t.owner[b.ID] = len(t.blocks)
			}
		}
		t.blocks = append(t.blocks, b)
	}
	m.Blocks = nil // the transcript's flat slice is the one copy
	t.msgs = append(t.msgs, m)
	t.turns = append(t.turns, turn)
	return &t.msgs[i]
}

// Linearize decodes a whole message array into a transcript.
func Linearize(raws [][]byte) *Transcript {
	t := NewTranscript()
	for _, r := range raws {
		t.Append(r)
	}
	return t
}

// LinearizeArray decodes a JSON array of messages.
func LinearizeArray(arr []byte) (*Transcript, error) {
	els, err := rawjson.Array(arr)
	if err != nil {
		return nil, err
	}
	return Linearize(els), nil
}
