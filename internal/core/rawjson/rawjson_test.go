package rawjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuoteMatchesJSONStringify(t *testing.T) {
	// Expected values are what node's JSON.stringify prints for the same string.
	tests := []struct {
		in, want string
	}{
		{"plain", `"plain"`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x01\x1f", `"\u0001\u001f"`},
		{"<>&", `"<>&"`},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"é😀", `"é😀"`},
		{"\x7f", "\"\x7f\""},
		{"\xed\xa0\x80", `"\ud800"`}, // WTF-8 lone high surrogate
		{"\xed\xbf\xbf", `"\udfff"`}, // WTF-8 lone low surrogate
		{"a\xffb", "\"a\uFFFDb\""},   // invalid UTF-8 byte
		{"", `""`},
	}
	for _, tt := range tests {
		if got := QuoteString(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// quoteRef is Quote written plainly, a byte or a rune at a time.
func quoteRef(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				if c < 0x20 {
					fmt.Fprintf(&b, `\u%04x`, c)
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		if u, ok := IsSurrogateAt(s, i); ok {
			fmt.Fprintf(&b, `\u%04x`, u)
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzQuote: Quote, which skips plain ASCII eight bytes at a time, writes
// what quoteRef does.
func FuzzQuote(f *testing.F) {
	for _, tt := range []string{"plain", "a\"b\\c\n", "\x01é😀\xed\xa0\x80a\xffb", strings.Repeat("INFO: ok\n", 9)} {
		f.Add(tt)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := QuoteString(s), quoteRef(s)
		if got != want {
			t.Fatalf("Quote(%q) = %s, want %s", s, got, want)
		}
		if n := QuotedLen(s); n != len(want) {
			t.Fatalf("QuotedLen(%q) = %d, want %d", s, n, len(want))
		}
	})
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`"plain"`, "plain", true},
		{`"a\nb"`, "a\nb", true},
		{`"\u00e9\ud83d\ude00"`, "é😀", true},
		{`"\ud800"`, "\xed\xa0\x80", true},
		{`"\ud800x"`, "\xed\xa0\x80x", true},
		{`"\udc00\ud800"`, "\xed\xb0\x80\xed\xa0\x80", true},
		{`"\/"`, "/", true},
		{"\"a\xffb\"", "a\uFFFDb", true},
		{`"bad\q"`, "", false},
		{`"ctl` + "\x01" + `"`, "", false},
		{`"\u12"`, "", false},
		{`nope`, "", false},
	}
	for _, tt := range tests {
		got, err := Unquote([]byte(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("Unquote(%s) err = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if got != tt.want {
			t.Errorf("Unquote(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestObjectKeepsOrderAndBytes(t *testing.T) {
	in := `{ "b" : 1 , "a":{"x":[1, 2]},"c":"\u0041" ,"b":2}`
	ms, err := Object([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"b", "a", "c", "b"}
	vals := []string{`1`, `{"x":[1, 2]}`, `"\u0041"`, `2`}
	if len(ms) != len(keys) {
		t.Fatalf("got %d members", len(ms))
	}
	for i, m := range ms {
		if m.Key != keys[i] || string(m.Value) != vals[i] {
			t.Errorf("member %d = %q:%s, want %q:%s", i, m.Key, m.Value, keys[i], vals[i])
		}
	}
	if v, _ := Get(ms, "b"); string(v) != "2" {
		t.Errorf("Get returns %s, want the last duplicate", v)
	}
}

func TestMalformed(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a":1} x`, `01`, `1.`, `-`, `1e`, `tru`, `"abc`, `{"a":[}`} {
		if Valid([]byte(in)) {
			t.Errorf("Valid(%q) = true", in)
		}
		if _, err := Object([]byte(in)); err == nil {
			t.Errorf("Object(%q) accepted", in)
		}
	}
}

func TestJSNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1796207641826", "1796207641826"},
		{"1.796207641826e12", "1796207641826"},
		{"-5", "-5"},
		{"-0", "0"},
		{"0.5", "0.5"},
		{"1e21", "1e+21"},
		{"1e-7", "1e-7"},
		{"0.000001", "0.000001"},
		{"12345678901234567890", "12345678901234567000"},
		{"007", ""},
	}
	for _, tt := range tests {
		got, ok := JSNumber([]byte(tt.in))
		if tt.want == "" {
			if ok && Valid([]byte(tt.in)) {
				t.Errorf("JSNumber(%s) accepted invalid literal", tt.in)
			}
			continue
		}
		if !ok || got != tt.want {
			t.Errorf("JSNumber(%s) = %q,%v want %q", tt.in, got, ok, tt.want)
		}
	}
}

// FuzzRoundTrip: Quote∘Unquote is the identity on decoded strings, the scanner
// agrees with encoding/json on validity, and nothing panics.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{`"x"`, `{"a":[1,{"b":null}]}`, `"\ud800"`, `[1e5,-0.1,true]`, "\"\xff\"", `"\u2028"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := Valid(b)
		if utf8.Valid(b) && valid != json.Valid(b) {
			t.Fatalf("Valid(%q)=%v, encoding/json says %v", b, valid, json.Valid(b))
		}
		if !valid {
			return
		}
		tb := Trim(b)
		if IsString(tb) {
			s, err := Unquote(tb)
			if err != nil {
				t.Fatalf("Unquote(%q): %v", tb, err)
			}
			q := Quote(nil, s)
			s2, err := Unquote(q)
			if err != nil || s2 != s {
				t.Fatalf("round trip %q -> %s -> %q (%v)", s, q, s2, err)
			}
			if !Valid(q) {
				t.Fatalf("Quote produced invalid JSON %q", q)
			}
		}
		if ms, err := Object(tb); err == nil {
			for _, m := range ms {
				if !Valid(m.Value) {
					t.Fatalf("member value %q invalid", m.Value)
				}
			}
		}
		if els, err := Array(tb); err == nil {
			for _, e := range els {
				if !Valid(e) {
					t.Fatalf("element %q invalid", e)
				}
			}
		}
	})
}

// BenchmarkUnquote decodes a 20 KB tool output (newline escapes every line,
// as JSON.stringify writes them).
func BenchmarkUnquote(b *testing.B) {
	var sb strings.Builder
	for k := 0; sb.Len() < 20_000; k++ {
		fmt.Fprintf(&sb, "toolu_1 line %d: the quick brown fox jumps over the lazy dog\t%d\n", k, k*17)
	}
	raw := Quote(nil, sb.String())
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Unquote(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPlainRunMatchesByteLoop checks the eight-bytes-at-a-time scan against
// the byte loop at every offset of inputs full of edge bytes.
func TestPlainRunMatchesByteLoop(t *testing.T) {
	edge := []byte{0, 0x1f, 0x20, 0x21, '"', '#', '\\', ']', 0x7f, 0x80, 0xff, 'a', 'a', 'a', 'a', 'a'}
	seed := uint32(1)
	for n := 0; n < 2000; n++ {
		b := make([]byte, n%70)
		for k := range b {
			seed = seed*1664525 + 1013904223
			b[k] = edge[seed>>28]
		}
		for _, ascii := range []bool{false, true} {
			tab := &special
			if ascii {
				tab = &unplain
			}
			for i := 0; i <= len(b); i++ {
				want := i
				for want < len(b) && !tab[b[want]] {
					want++
				}
				if got := plainRun(b, i, ascii); got != want {
					t.Fatalf("plainRun(%q, %d, %v) = %d, want %d", b, i, ascii, got, want)
				}
				if got := plainRun(string(b), i, ascii); got != want {
					t.Fatalf("plainRun(string %q, %d, %v) = %d, want %d", b, i, ascii, got, want)
				}
			}
		}
	}
}

// FuzzOfValid: on valid JSON the OfValid splitters return exactly what
// Object, Array and ArraySpans return; on anything else they do not panic.
func FuzzOfValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"x\"}"}],"c":"\\"}`, `[1e5,-0.1,true,null,"]",{"k":[]}]`, ` { "role" : "user" , "content" : [ { "type":"text","text":"a\\\\\"b" } ] } `, `{}`, `[]`, `"s"`, `{"a":1`, `[}l`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mo, eo := Object(b)
		mv, ev := ObjectOfValid(b)
		ao, ea := Array(b)
		av, eav := ArrayOfValid(b)
		as, ss, eas := ArraySpans(b)
		avs, svs, eavs := ArraySpansOfValid(b)
		if !Valid(b) {
			return
		}
		if (eo == nil) != (ev == nil) || eo == nil && !reflect.DeepEqual(mo, mv) {
			t.Fatalf("ObjectOfValid(%q) = %v, %v; Object: %v, %v", b, mv, ev, mo, eo)
		}
		if (ea == nil) != (eav == nil) || ea == nil && !reflect.DeepEqual(ao, av) {
			t.Fatalf("ArrayOfValid(%q) = %q, %v; Array: %q, %v", b, av, eav, ao, ea)
		}
		if (eas == nil) != (eavs == nil) || eas == nil && (!reflect.DeepEqual(as, avs) || !reflect.DeepEqual(ss, svs)) {
			t.Fatalf("ArraySpansOfValid(%q) = %q, %v, %v; ArraySpans: %q, %v, %v", b, avs, svs, eavs, as, ss, eas)
		}
	})
}

func TestPlainInt(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"-7", -7, true}, {"999999999999999999", 999999999999999999, true},
		{"1000000000000000000", 0, false}, {"", 0, false}, {"-", 0, false}, {"1.5", 0, false}, {"1e3", 0, false}, {`"3"`, 0, false}, {" 3", 0, false},
	} {
		if got, ok := PlainInt([]byte(c.in)); got != c.want || ok != c.ok {
			t.Errorf("PlainInt(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// FuzzPlainString: where PlainString answers, encoding/json decodes the
// same string; it answers for the plain literals a tool's arguments carry.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"src/main.go"`, `"cat a.txt"`, `""`, `"a\"b"`, `"a\\b"`, `"\u00e9"`, `"é"`, "\"a\tb\"", `"\ud800"`, `"x`, `x"`, `"`, `"a"b"`, "\"a\x7fb\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := PlainString(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil || got != want {
			t.Fatalf("PlainString(%q) = %q; encoding/json: %q, %v", raw, got, want, err)
		}
	})
}

func TestPlainStringAnswers(t *testing.T) {
	for _, s := range []string{`"src/main.go"`, `"cat a.txt | head -n 5"`, `""`} {
		if got, ok := PlainString([]byte(s)); !ok || `"`+got+`"` != s {
			t.Errorf("PlainString(%s) = %q, %v", s, got, ok)
		}
	}
	for _, s := range []string{`"a\"b"`, `"\u00e9"`, `"é"`, "\"a\tb\"", `"x`, `"a"b"`} {
		if _, ok := PlainString([]byte(s)); ok {
			t.Errorf("PlainString(%s) answered; encoding/json must", s)
		}
	}
}
