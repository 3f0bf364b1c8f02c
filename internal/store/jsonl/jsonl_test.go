package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/testsupport/testfs"
)

var start = []byte(`{"t":"`)

func TestAppend(t *testing.T) {
	for _, c := range []struct {
		name, before, want string
	}{
		{"empty file", "", `{"t":"a"}` + "\n"},
		{"after a whole line", `{"t":"z"}` + "\n", `{"t":"z"}` + "\n" + `{"t":"a"}` + "\n"},
		{"after a torn line", `{"t":"z","x":"ab`, `{"t":"z","x":"ab` + Torn + `{"t":"a"}` + "\n"},
		{"after a whole value without its newline", `{"t":"z"}`, `{"t":"z"}` + Torn + `{"t":"a"}` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.jsonl")
			if err := os.WriteFile(path, []byte(c.before), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			size, err := Append(f, []byte(`{"t":"a"}`+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != c.want || size != int64(len(c.want)) {
				t.Fatalf("file %q (size %d), want %q", got, size, c.want)
			}
			var recs []string
			Scan(got, start, func(l Line) {
				if l.Ended && rawjson.Valid(l.Bytes) {
					recs = append(recs, string(l.Bytes))
				}
			})
			if recs[len(recs)-1] != `{"t":"a"}` || (c.before != "" && c.before[len(c.before)-1] != '\n' && len(recs) != 1) {
				t.Fatalf("records %q", recs)
			}
		})
	}
	f, _ := os.CreateTemp(t.TempDir(), "x")
	defer f.Close()
	if _, err := Append(f, []byte(`{"t":"a"}`)); err == nil {
		t.Fatal("data without its newline was appended")
	}
}

func TestRecover(t *testing.T) {
	for _, c := range []struct {
		name, line, want string
	}{
		{"torn then whole", `{"t":"text","text":"abc` + `{"t":"entry","e":{"k":1}}`, `{"t":"entry","e":{"k":1}}`},
		{"whole without newline then whole", `{"t":"a"}{"t":"b"}`, `{"t":"b"}`},
		{"torn only", `{"t":"text","text":"abc`, ""},
		{"nested record-like object is not a record", `{"t":"x","n":[{"t":"y"},{"t":"z"}]` + `{"t":"w"}`, `{"t":"w"}`},
		{"torn inside a nested object", `{"t":"x","n":[{"t":"y"},{"t":"`, ""},
		{"escaped start inside a string", `{"t":"x","s":"{\"t\":\"y\"}"`, ""},
		{"Pi lines", `{"type":"message","message":{"content":[{"type":"text","text":"a"},{"type":"te` + `{"type":"message","id":"b","message":{"content":[{"type":"text","text":"b"}]}}`,
			`{"type":"message","id":"b","message":{"content":[{"type":"text","text":"b"}]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := start
			if bytes.HasPrefix([]byte(c.line), []byte(`{"type":`)) {
				st = []byte(`{"type":"`)
			}
			got, ok := Recover([]byte(c.line), st)
			if string(got) != c.want || ok != (c.want != "") {
				t.Fatalf("Recover = %q, %v; want %q", got, ok, c.want)
			}
		})
	}
}

// FuzzScan writes records, some torn (a write that failed part way, then
// ended with Torn by the next append) and some glued onto a torn prefix
// without the mark (two processes racing), and checks that Scan yields
// every whole record, in order, and nothing else.
func FuzzScan(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, "a\u2028<&>\\\"")
	f.Add([]byte{3, 3, 3, 0, 2}, `{"t":"x"}`)
	f.Add([]byte{2, 2, 2, 2}, "\n")
	f.Fuzz(scanProperty)
}

func scanProperty(t *testing.T, plan []byte, s string) {
	{
		var data []byte
		var want []string
		for i, p := range plan {
			type inner struct {
				T, S string
			}
			rec, _ := json.Marshal(struct {
				T      string  `json:"t"`
				N      int     `json:"n"`
				S      string  `json:"s"`
				Nested []inner `json:"nested"`
			}{"r", i, s, []inner{{"inner", s}}})
			switch p % 4 {
			case 0, 1: // written whole
				data = append(append(data, rec...), '\n')
				want = append(want, string(rec))
			case 2: // torn, then ended by the next Append
				cut := int(p/4) % (len(rec) + 1)
				data = append(append(data, rec[:cut]...), Torn...)
			case 3: // torn, and the next record glued onto it
				cut := int(p/4) % (len(rec) + 1)
				data = append(data, rec[:cut]...)
			}
		}
		var got []string
		Scan(data, start, func(l Line) {
			if l.Ended && rawjson.Valid(l.Bytes) {
				got = append(got, string(l.Bytes))
			}
		})
		if !slices.Equal(got, want) {
			t.Fatalf("data %q\n got %q\nwant %q", data, got, want)
		}
	}
}

// TestAppendOnAFullDisk: on a real full filesystem, the write that fails
// leaves a torn line; the append after space comes back starts clean, and
// every record whose write succeeded reads back.
func TestAppendOnAFullDisk(t *testing.T) {
	fs := testfs.Tmpfs(t, 64<<10)
	path := filepath.Join(fs.Dir, "c.jsonl")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := func(n, size int) []byte {
		b, _ := json.Marshal(map[string]any{"t": "text", "n": n, "text": string(bytes.Repeat([]byte("x"), size))})
		return append(b, '\n')
	}
	if _, err := Append(f, rec(0, 100)); err != nil {
		t.Fatal(err)
	}
	fs.Fill()
	// The file's first page has room left: this write lands in part.
	_, err = Append(f, rec(1, 10000))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	data, _ := os.ReadFile(path)
	if len(data) <= len(rec(0, 100)) || data[len(data)-1] == '\n' {
		t.Fatalf("the failed write left no torn line (%d bytes): the test does not test it", len(data))
	}
	fs.Free()
	for n := 2; n < 4; n++ {
		if _, err := Append(f, rec(n, 100)); err != nil {
			t.Fatal(err)
		}
	}
	data, _ = os.ReadFile(path)
	var got []string
	Scan(data, start, func(l Line) {
		if l.Ended && rawjson.Valid(l.Bytes) {
			var r struct{ N int }
			json.Unmarshal(l.Bytes, &r)
			got = append(got, fmt.Sprint(r.N))
		}
	})
	if !slices.Equal(got, []string{"0", "2", "3"}) {
		t.Fatalf("records read back %v, want [0 2 3]", got)
	}
}
