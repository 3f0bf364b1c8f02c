// Package rawjson reads and writes JSON the way Pi's JavaScript runtime does,
// without ever re-encoding bytes it was not asked to change.
//
// Pi's messages cross the process boundary as JSON.stringify output. The engine
// must read their fields, substitute a few string values, and hand every other
// byte back exactly as it came. encoding/json cannot do that: it reorders nothing
// but it escapes <, > and & by default, turns lone UTF-16 surrogates into U+FFFD
// and offers no ordered view of an object's members. This package scans raw
// values in place instead:
//
//   - Object and Array split a value into raw members and elements, in order.
//   - Unquote decodes a string literal; a lone surrogate escape (\ud800) becomes
//     its WTF-8 bytes so that Quote can write it back unchanged.
//   - Quote encodes a string exactly as JavaScript's JSON.stringify does.
package rawjson

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Member is one name/value pair of an object, value kept as raw bytes.
type Member struct {
	Key   string
	Value []byte
	// Start and End are the byte offsets of Value in the object's input.
	Start, End int
}

// SyntaxError reports malformed JSON and the byte offset where it was found.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("json: %s at offset %d", e.Msg, e.Offset)
}

func errAt(i int, format string, args ...any) error {
	return &SyntaxError{Offset: i, Msg: fmt.Sprintf(format, args...)}
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 10000

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Valid reports whether b holds exactly one JSON value, optionally surrounded by
// whitespace.
func Valid(b []byte) bool {
	i := skipSpace(b, 0)
	end, err := scanValue(b, i, 0)
	if err != nil {
		return false
	}
	return skipSpace(b, end) == len(b)
}

// Trim returns b without surrounding JSON whitespace.
func Trim(b []byte) []byte {
	i := skipSpace(b, 0)
	j := len(b)
	for j > i {
		switch b[j-1] {
		case ' ', '\t', '\n', '\r':
			j--
			continue
		}
		break
	}
	return b[i:j]
}

// ValueEnd returns the offset just past the JSON value that starts at or after
// offset i (leading whitespace is skipped).
func ValueEnd(b []byte, i int) (int, error) {
	return scanValue(b, skipSpace(b, i), 0)
}

func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errAt(i, "unexpected end of input")
	}
	switch c := b[i]; {
	case c == '{':
		return scanObject(b, i, depth+1)
	case c == '[':
		return scanArray(b, i, depth+1)
	case c == '"':
		return scanString(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	default:
		return i, errAt(i, "invalid character %q looking for a value", c)
	}
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, errAt(i, "invalid literal")
	}
	return i + len(lit), nil
}

func scanNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, errAt(start, "truncated number")
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, errAt(i, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, errAt(i, "invalid number fraction")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, errAt(i, "invalid number exponent")
		}
	}
	return i, nil
}

// special marks the bytes a string scan must stop at: quote, backslash and
// control characters. One table load per byte keeps the common case tight.
var special = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// plainRun returns the first index at or after i whose byte is special (or,
// with ascii, not ASCII), or len(b). Eight bytes are checked at a time.
func plainRun[T string | []byte](b T, i int, ascii bool) int {
	for ; i+8 <= len(b); i += 8 {
		w := load64(b, i)
		q := w ^ ('"' * lo8)
		s := w ^ ('\\' * lo8)
		// A byte is zero in q or s, or below 0x20 in w, exactly where
		// (x - 0x01..) & ^x & 0x80.. sets its high bit (for the < 0x20 test,
		// bytes with the high bit set in w are ASCII-excluded by ^w).
		m := ((q-lo8) & ^q | (s-lo8) & ^s | (w-0x20*lo8) & ^w) & hi8
		if ascii {
			m |= w & hi8
		}
		if m != 0 {
			// Each test flags falsely only above a byte it flags truly, so
			// the lowest flag is the first byte that needs a look.
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	t := &special
	if ascii {
		t = &unplain
	}
	for i < len(b) && !t[b[i]] {
		i++
	}
	return i
}

// load64 is b[i:i+8] as a little-endian word (one load, for string and
// []byte alike: binary.LittleEndian takes only the latter).
func load64[T string | []byte](b T, i int) uint64 {
	_ = b[i+7]
	return uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24 |
		uint64(b[i+4])<<32 | uint64(b[i+5])<<40 | uint64(b[i+6])<<48 | uint64(b[i+7])<<56
}

func scanString(b []byte, i int) (int, error) {
	start := i
	i++
	for {
		i = plainRun(b, i, false)
		if i >= len(b) {
			return i, errAt(start, "unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, errAt(start, "unterminated string")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, errAt(i, "truncated \\u escape")
				}
				for k := i + 2; k < i+6; k++ {
					if unhex(b[k]) < 0 {
						return k, errAt(k, "invalid \\u escape")
					}
				}
				i += 6
			default:
				return i, errAt(i, "invalid escape")
			}
		default:
			return i, errAt(i, "control character in string")
		}
	}
}

func scanObject(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, errAt(i, "nesting too deep")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, errAt(i, "expected object key")
		}
		var err error
		if i, err = scanString(b, i); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, errAt(i, "expected ':'")
		}
		if i, err = scanValue(b, skipSpace(b, i+1), depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, errAt(i, "unterminated object")
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, errAt(i, "expected ',' or '}'")
		}
		i = skipSpace(b, i+1)
	}
}

func scanArray(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, errAt(i, "nesting too deep")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = scanValue(b, i, depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, errAt(i, "unterminated array")
		}
		if b[i] == ']' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, errAt(i, "expected ',' or ']'")
		}
		i = skipSpace(b, i+1)
	}
}

// ErrNotObject and ErrNotArray report a value of the wrong kind.
var (
	ErrNotObject = errors.New("json: not an object")
	ErrNotArray  = errors.New("json: not an array")
	ErrNotString = errors.New("json: not a string")
)

// Object splits a JSON object into its members, in document order. Values alias b.
// Duplicate keys are kept; Get returns the last, as JSON.parse does.
func Object(b []byte) ([]Member, error) {
	return AppendObject(make([]Member, 0, 12), b)
}

// AppendObject is Object appending to dst, so callers can reuse a buffer.
func AppendObject(dst []Member, b []byte) ([]Member, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return dst, ErrNotObject
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if skipSpace(b, i+1) != len(b) {
			return dst, errAt(i+1, "trailing data after object")
		}
		return dst, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return dst, errAt(i, "expected object key")
		}
		ks := i
		ke, err := scanString(b, i)
		if err != nil {
			return dst, err
		}
		key, ok := commonKey(b[ks+1 : ke-1])
		if !ok {
			if key, err = Unquote(b[ks:ke]); err != nil {
				return dst, err
			}
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return dst, errAt(i, "expected ':'")
		}
		vs := skipSpace(b, i+1)
		ve, err := scanValue(b, vs, 1)
		if err != nil {
			return dst, err
		}
		dst = append(dst, Member{Key: key, Value: b[vs:ve:ve], Start: vs, End: ve})
		i = skipSpace(b, ve)
		if i >= len(b) {
			return dst, errAt(i, "unterminated object")
		}
		if b[i] == '}' {
			if skipSpace(b, i+1) != len(b) {
				return dst, errAt(i+1, "trailing data after object")
			}
			return dst, nil
		}
		if b[i] != ',' {
			return dst, errAt(i, "expected ',' or '}'")
		}
		i = skipSpace(b, i+1)
	}
}

// commonKey returns the keys of Pi's messages and session entries (and of
// the engine's fold entries) without allocating them anew for every object:
// a map index by string(b) does not allocate.
func commonKey(b []byte) (string, bool) {
	k, ok := commonKeys[string(b)]
	return k, ok
}

var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"role", "content", "type", "text", "timestamp", "id", "parentId", "message", "toolCallId", "toolName", "isError", "name", "arguments", "usage", "api", "provider", "model", "stopReason", "responseId", "thinking", "thinkingSignature", "details", "input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost", "total", "customType", "data", "seq", "code", "digest", "kind", "v"} {
		m[k] = k
	}
	return m
}()

// Array splits a JSON array into its raw elements, in order. Elements alias b.
func Array(b []byte) ([][]byte, error) {
	els, _, err := ArraySpans(b)
	return els, err
}

// ArraySpans is Array that also returns each element's start offset in b.
func ArraySpans(b []byte) ([][]byte, []int, error) {
	var starts []int
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, nil, ErrNotArray
	}
	var out [][]byte
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		if skipSpace(b, i+1) != len(b) {
			return nil, nil, errAt(i+1, "trailing data after array")
		}
		return out, starts, nil
	}
	for {
		vs := i
		ve, err := scanValue(b, vs, 1)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, b[vs:ve:ve])
		starts = append(starts, vs)
		i = skipSpace(b, ve)
		if i >= len(b) {
			return nil, nil, errAt(i, "unterminated array")
		}
		if b[i] == ']' {
			if skipSpace(b, i+1) != len(b) {
				return nil, nil, errAt(i+1, "trailing data after array")
			}
			return out, starts, nil
		}
		if b[i] != ',' {
			return nil, nil, errAt(i, "expected ',' or ']'")
		}
		i = skipSpace(b, i+1)
	}
}

// The OfValid splitters are Object and Array for input already known to be
// valid JSON: a value that Object, Array or Valid accepted (or part of
// one). They do not validate it again; a string's end is found with
// bytes.IndexByte, so long texts are skipped many bytes at a time. On
// valid input they return exactly what Object and Array return; on invalid
// input they return an error or unspecified members, never panic.

// ObjectOfValid is Object for valid JSON.
func ObjectOfValid(b []byte) ([]Member, error) {
	return AppendObjectOfValid(make([]Member, 0, 12), b)
}

// AppendObjectOfValid is AppendObject for valid JSON.
func AppendObjectOfValid(dst []Member, b []byte) ([]Member, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return dst, ErrNotObject
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] != '"' {
			return dst, errAt(i, "expected object key")
		}
		ke := stringEnd(b, i)
		if ke < 0 {
			return dst, errAt(i, "unterminated string")
		}
		key, ok := commonKey(b[i+1 : ke-1])
		if !ok {
			var err error
			if key, err = Unquote(b[i:ke]); err != nil {
				return dst, err
			}
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return dst, errAt(i, "expected ':'")
		}
		vs := skipSpace(b, i+1)
		ve := valueEnd(b, vs)
		if ve < 0 {
			return dst, errAt(vs, "bad value")
		}
		dst = append(dst, Member{Key: key, Value: b[vs:ve:ve], Start: vs, End: ve})
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return dst, errAt(i, "unterminated object")
	}
	return dst, nil
}

// ArrayOfValid is Array for valid JSON.
func ArrayOfValid(b []byte) ([][]byte, error) {
	els, _, err := arrayOfValid(b, false)
	return els, err
}

// ArraySpansOfValid is ArraySpans for valid JSON.
func ArraySpansOfValid(b []byte) ([][]byte, []int, error) { return arrayOfValid(b, true) }

func arrayOfValid(b []byte, spans bool) ([][]byte, []int, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, nil, ErrNotArray
	}
	var out [][]byte
	var starts []int
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != ']' {
		ve := valueEnd(b, i)
		if ve < 0 {
			return nil, nil, errAt(i, "bad value")
		}
		out = append(out, b[i:ve:ve])
		if spans {
			starts = append(starts, i)
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return nil, nil, errAt(i, "unterminated array")
	}
	return out, starts, nil
}

// stringEnd returns the offset just past the string literal at b[i], or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// valueEnd returns the offset just past the valid value at b[i], or -1.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = stringEnd(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
			if i == start {
				return -1 // no value here: never loop without progress
			}
			return i
		}
		i++
	}
	return i
}

// Get returns the raw value of the last member named key.
func Get(ms []Member, key string) ([]byte, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Key == key {
			return ms[i].Value, true
		}
	}
	return nil, false
}

// IsString reports whether raw is a string literal.
func IsString(raw []byte) bool { return len(raw) > 0 && raw[0] == '"' }

// IsNull reports whether raw is the literal null.
func IsNull(raw []byte) bool { return string(raw) == "null" }

// Bool decodes a JSON boolean; anything else is false, as JavaScript's !!x
// would treat null, absent or false.
func Bool(raw []byte) bool { return string(raw) == "true" }

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// PlainString returns the value of raw when it is a JSON string literal of
// printable ASCII without escapes: its bytes between the quotes, as every
// JSON decoder reads them (encoding/json and Unquote alike). Anything else
// is not ok, for a full decoder to read.
func PlainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	if plainRun(body, 0, true) != len(body) || bytes.IndexByte(body, 0x7f) >= 0 {
		return "", false
	}
	return string(body), true
}

// Unquote decodes a JSON string literal. Escaped lone UTF-16 surrogates become
// their 3-byte WTF-8 encoding (never U+FFFD), so Quote reproduces them; raw
// invalid UTF-8 bytes become U+FFFD, as a JavaScript UTF-8 decoder would read them.
func Unquote(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", ErrNotString
	}
	if s, ok := PlainString(raw); ok {
		return s, nil
	}
	body := raw[1 : len(raw)-1]
	if !hasEscapeOrCtl(body) && utf8.Valid(body) {
		return string(body), nil
	}
	var sb strings.Builder
	sb.Grow(len(body))
	for i := 0; i < len(body); {
		// Copy the run of plain ASCII up to the next byte that needs a look.
		j := plainRun(body, i, true)
		if j > i {
			sb.Write(body[i:j])
			i = j
			if i == len(body) {
				break
			}
		}
		c := body[i]
		switch {
		case c == '\\':
			if i+1 >= len(body) {
				return "", errAt(i, "unterminated escape")
			}
			switch body[i+1] {
			case '"', '\\', '/':
				sb.WriteByte(body[i+1])
				i += 2
			case 'b':
				sb.WriteByte('\b')
				i += 2
			case 'f':
				sb.WriteByte('\f')
				i += 2
			case 'n':
				sb.WriteByte('\n')
				i += 2
			case 'r':
				sb.WriteByte('\r')
				i += 2
			case 't':
				sb.WriteByte('\t')
				i += 2
			case 'u':
				r, ok := hex4(body, i+2)
				if !ok {
					return "", errAt(i, "invalid \\u escape")
				}
				i += 6
				if r >= 0xD800 && r <= 0xDBFF {
					if lo, ok := hex4(body, i+2); ok && i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
						sb.WriteRune(0x10000 + (r-0xD800)<<10 + (lo - 0xDC00))
						i += 6
						continue
					}
					writeSurrogate(&sb, r)
					continue
				}
				if r >= 0xDC00 && r <= 0xDFFF {
					writeSurrogate(&sb, r)
					continue
				}
				sb.WriteRune(r)
			default:
				return "", errAt(i, "invalid escape")
			}
		case c == '"' || c < 0x20:
			return "", errAt(i, "invalid character in string")
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size <= 1 {
				sb.WriteRune(utf8.RuneError)
				i++
				continue
			}
			sb.Write(body[i : i+size])
			i += size
		}
	}
	return sb.String(), nil
}

// unplain marks the bytes Unquote's copy loop stops at: special's, and
// every non-ASCII byte (decoded rune by rune).
var unplain = func() (t [256]bool) {
	t = special
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

func hasEscapeOrCtl(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c == '"' || c < 0x20 {
			return true
		}
	}
	return false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for k := i; k < i+4; k++ {
		h := unhex(b[k])
		if h < 0 {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// writeSurrogate writes a lone surrogate code unit as WTF-8.
func writeSurrogate(sb *strings.Builder, r rune) {
	sb.WriteByte(byte(0xE0 | (r >> 12)))
	sb.WriteByte(byte(0x80 | ((r >> 6) & 0x3F)))
	sb.WriteByte(byte(0x80 | (r & 0x3F)))
}

// IsSurrogateAt reports whether s[i:] starts with a WTF-8 encoded lone surrogate
// and returns the code unit.
func IsSurrogateAt(s string, i int) (rune, bool) {
	if i+2 < len(s) && s[i] == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2] >= 0x80 && s[i+2] <= 0xBF {
		return rune(s[i]&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), true
	}
	return 0, false
}

const hexDigits = "0123456789abcdef"

// Quote appends s as a JSON string literal encoded exactly as JavaScript's
// JSON.stringify encodes it: only quote, backslash and control characters are
// escaped (with the short forms where they exist); lone surrogates (WTF-8) are
// written as \uXXXX. Bytes that are neither UTF-8 nor WTF-8 become U+FFFD.
func Quote(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i = plainRun(s, i, true); i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		if u, ok := IsSurrogateAt(s, i); ok {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', hexDigits[u>>12&0xF], hexDigits[u>>8&0xF], hexDigits[u>>4&0xF], hexDigits[u&0xF])
			i += 3
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// QuotedLen is len(Quote(nil, s)), counted without building it.
func QuotedLen(s string) int {
	n := 2
	start := 0
	for i := 0; i < len(s); {
		if i = plainRun(s, i, true); i == len(s) {
			break
		}
		n += i - start
		c := s[i]
		switch {
		case c < utf8.RuneSelf:
			switch c {
			case '"', '\\', '\b', '\f', '\n', '\r', '\t':
				n += 2
			default:
				n += 6
			}
			i++
		default:
			if _, ok := IsSurrogateAt(s, i); ok {
				n, i = n+6, i+3
			} else if r, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size == 1 {
				n, i = n+len("\uFFFD"), i+1
			} else {
				n, i = n+size, i+size
			}
		}
		start = i
	}
	return n + len(s) - start
}

// QuoteString is Quote into a new string.
func QuoteString(s string) string { return string(Quote(nil, s)) }

// JSNumber parses a JSON number literal and formats it as JavaScript's
// String(n) would, so ids built from numeric timestamps match Pi's.
func JSNumber(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return "", false
	}
	// Fast path: a plain integer literal that float64 represents exactly.
	plain := true
	for k, c := range raw {
		if !(c >= '0' && c <= '9') && !(k == 0 && c == '-') {
			plain = false
			break
		}
	}
	if plain && len(raw) <= 15 && !(len(raw) > 1 && raw[0] == '0') && string(raw) != "-0" {
		return string(raw), true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return "", false
	}
	return FormatJSNumber(f), true
}

// FormatJSNumber formats f as JavaScript's Number.prototype.toString().
func FormatJSNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. 1e+21, 1.5e-07
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	if exp == "" {
		exp = "0"
	}
	return mant + "e" + string(sign) + exp
}

// PlainInt parses an integer literal (optional minus, at most 18 digits, so
// it fits an int): the fast readers' test for a number encoding/json would
// decode into an int the same way.
func PlainInt(raw []byte) (int, bool) {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(raw))
	return n, err == nil
}
