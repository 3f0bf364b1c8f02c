// Package jsonl appends to and reads the append-only JSON-lines files that
// hold context-fold's records: the proxy's conversation files, the seed
// index, Pi's session file (read only).
//
// A write that fails part way (a full disk: write(2) returns a short count,
// then ENOSPC) leaves a torn line at the end of the file. Appending after
// it would glue the next record onto the torn bytes, and a reader that
// skips lines that are not JSON would then lose that next record too,
// though its write succeeded. Two rules keep every completed record
// readable:
//
//   - Append starts on a line of its own: when the file does not end in a
//     newline, a newline goes first, in the same write.
//   - Recover finds the record a damaged line ends with, for a reader: the
//     torn prefix is dropped, the complete record after it is kept. Lines
//     glued by a race between two processes' appends are read this way.
//
// A torn line itself never takes effect: it is not a complete JSON value.
package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// Torn ends a torn line. Every record is written with its newline in one
// write, so a line without one is a write that failed, never in effect:
// the mark makes it invalid JSON even if the bytes that did land are a
// whole value.
const Torn = "#torn\n"

// Append writes data, one or more whole lines each ending in a newline, to
// f, which is open for reading and appending (O_RDWR|O_APPEND), in one
// write, so lines that several processes append never interleave. When
// the file's last byte is not a newline, Torn is written first. It
// returns the file's size after the write as far as this process knows
// it: another process may append meanwhile.
func Append(f *os.File, data []byte) (int64, error) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return 0, errors.New("jsonl: append: data does not end a line")
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("jsonl: read the last byte: %w", err)
		}
		if last[0] != '\n' {
			data = append([]byte(Torn), data...)
		}
	}
	n, err := f.Write(data)
	if err == nil && n < len(data) {
		err = io.ErrShortWrite
	}
	return size + int64(n), err
}

// Recover returns the complete JSON object a damaged line ends with: the
// line from the last offset at which a record of the file's kind starts
// (start, e.g. `{"t":"`) through its end is one valid JSON object. ok is
// false when there is none (a torn line with nothing after it). A record
// nested inside another cannot be mistaken for it: what follows a nested
// object (a comma, closing brackets) is not part of one object.
//
// The candidates are tried from the right; the work is bounded by a few
// scans of the line, so a hostile file of many glued fragments costs no
// more than reading it a few times (and then reads as damaged).
func Recover(line, start []byte) (rec []byte, ok bool) {
	budget := 4*len(line) + 1<<16
	for end := len(line); end > 0 && budget > 0; {
		i := bytes.LastIndex(line[:end], start)
		if i <= 0 {
			return nil, false // 0 is the damaged line itself
		}
		stop, err := rawjson.ValueEnd(line, i)
		if err != nil {
			var se *rawjson.SyntaxError
			if errors.As(err, &se) {
				stop = se.Offset
			}
		} else if len(rawjson.Trim(line[stop:])) == 0 {
			return line[i:], true
		}
		budget -= max(stop-i, 1)
		end = i
	}
	return nil, false
}

// Line is one line of a JSON-lines file as Scan reads it.
type Line struct {
	// Bytes is the line without its newline; a recovered line is the
	// record its damaged line ended with (see Recover).
	Bytes []byte
	// Offset is where the line starts in the data.
	Offset int
	// Ended says a newline ends the line; the last line of a file may
	// lack it (a write in progress, or torn).
	Ended bool
	// Recovered says the line was damaged and Bytes is the record found
	// at its end.
	Recovered bool
}

// Scan calls fn for each line of data in order: lines that are a JSON
// value as they are, damaged ones as the record they end with (see
// Recover; start names where a record begins), or, when no record can be
// recovered, as they are, for the caller to count as bad. Blank lines are
// skipped.
func Scan(data, start []byte, fn func(Line)) {
	for off := 0; off < len(data); {
		end, next, ended := len(data), len(data), false
		if nl := bytes.IndexByte(data[off:], '\n'); nl >= 0 {
			end, next, ended = off+nl, off+nl+1, true
		}
		line := Line{Bytes: data[off:end:end], Offset: off, Ended: ended}
		off = next
		if len(rawjson.Trim(line.Bytes)) == 0 {
			continue
		}
		if !rawjson.Valid(line.Bytes) {
			if rec, ok := Recover(line.Bytes, start); ok {
				line.Bytes, line.Recovered = rec, true
			}
		}
		fn(line)
	}
}
