// Package pisession writes Pi session files (format version 3) for tests:
// a header, then one entry a line, each the child of the one before.
package pisession

import (
	"fmt"
	"os"
	"strings"
)

// File is a session file being written.
type File struct {
	b      strings.Builder
	parent string
	n      int
}

// New starts a session file with id's header.
func New(id string) *File {
	f := &File{parent: "null"}
	fmt.Fprintf(&f.b, `{"type":"session","version":3,"id":%q,"timestamp":"2026-12-02T00:00:00.000Z","cwd":"/w"}`+"\n", id)
	return f
}

// entry appends an entry whose fields after id, parentId and timestamp are
// body, and returns its id.
func (f *File) entry(body string) string {
	id := fmt.Sprintf("e%07d", f.n)
	f.n++
	fmt.Fprintf(&f.b, `{"id":%q,"parentId":%s,"timestamp":"2026-12-02T00:00:00.000Z",%s}`+"\n", id, f.parent, body)
	f.parent = `"` + id + `"`
	return id
}

// Message appends a message entry holding the AgentMessage JSON m.
func (f *File) Message(m []byte) string { return f.entry(`"type":"message","message":` + string(m)) }

// Custom appends an extension's custom entry.
func (f *File) Custom(customType string, data []byte) string {
	return f.entry(`"type":"custom","customType":"` + customType + `","data":` + string(data))
}

// Compaction appends a compaction entry: Pi's summary, and the entry the
// history is kept from.
func (f *File) Compaction(summary, firstKept string) string {
	return f.entry(fmt.Sprintf(`"type":"compaction","summary":%q,"firstKeptEntryId":%q,"tokensBefore":0`, summary, firstKept))
}

// Next returns the id the next entry will get.
func (f *File) Next() string { return fmt.Sprintf("e%07d", f.n) }

// WriteFile writes the file to path.
func (f *File) WriteFile(path string) error { return os.WriteFile(path, []byte(f.b.String()), 0o644) }
