package indexfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/contextfold/contextfold/internal/core/seedindex"
	"github.com/contextfold/contextfold/internal/testsupport/testfs"
)

func rec(seq int) Record {
	return Record{Record: seedindex.Record{V: 1, Kind: "fold-index", Seq: seq, Spans: []seedindex.Span{{ID: "r:x", Code: "abcdef"}}, Errors: []string{"ERROR <&> \xed\xa0\x80"}}, Session: "s"}
}

func TestAppendVoidRead(t *testing.T) {
	for _, dir := range []string{t.TempDir(), ""} {
		s := Open(Dir(dir, "sess"))
		if dir == "" && s.Path() != "" {
			t.Fatal("a session without a directory must not get a file")
		}
		for _, seq := range []int{1, 2, 3} {
			if err := s.Append(rec(seq)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Void(2, ""); err != nil {
			t.Fatal(err)
		}
		rs, floor, err := s.Read()
		if err != nil || len(rs) != 2 || rs[0].Seq != 1 || rs[1].Seq != 3 || floor != 3 {
			t.Fatalf("dir %q: %+v floor %d %v", dir, rs, floor, err)
		}
		s.Void(3, "")
		if _, floor, _ := s.Read(); floor != 3 {
			t.Fatalf("a retraction lowered the floor to %d", floor)
		}
	}
}

func TestTolerantRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "seed-index.jsonl")
	os.WriteFile(p, []byte("junk\n{\"kind\":\"fold-index\",\"seq\":4}\n{\"v\":1,\"kind\":\"fold-index\",\"seq\":5,\"spans\":[]}\n{\"kind\":\"fold-ind"), 0o644)
	rs, floor, err := (&Store{path: p}).Read()
	if err != nil || len(rs) != 1 || rs[0].Seq != 5 || floor != 5 {
		t.Fatalf("%+v %d %v", rs, floor, err)
	}
}

// TestParseFloorAgreesWithParse: the fast floor is Parse's on every kind of
// line, tricky ones included.
func TestParseFloorAgreesWithParse(t *testing.T) {
	lines := []string{
		`{"v":1,"kind":"fold-index","seq":3,"spans":[]}`,
		`{"v":1,"kind":"fold-retract","seq":7}`,
		`{"kind":"x","seq":12.0}`,
		`{"kind":"x","seq":1e1}`,
		`{"kind":"x","Seq":40}`,
		`{"kind":"x","SEQ":41,"seq":2}`,
		`{"kind":5,"seq":50}`,
		`{"kind":null,"seq":9}`,
		`{"kind":"x","seq":null}`,
		`{"kind":"x","seq":"60"}`,
		`{"kind":"x","seq":-4}`,
		`{"kind":"x","seq":99999999999999999999}`,
		`[1,2]`,
		`not json`,
		`{"kind":"x","seq":13`,
		``,
		`{"kind":"x","seq":8}` + "\r",
		`{"kind":"x","ſeq":70}`,
		`{"kinD":"x","seq":14}`,
		`{"kinD":3,"seq":71}`,
	}
	for i := range lines {
		for j := i; j <= len(lines); j++ {
			data := []byte(strings.Join(lines[i:j], "\n"))
			_, want := Parse(data)
			if got := ParseFloor(data); got != want {
				t.Fatalf("ParseFloor(%q) = %d, Parse floor %d", data, got, want)
			}
		}
	}
	for _, l := range lines {
		_, want := Parse([]byte(l))
		if got := ParseFloor([]byte(l)); got != want {
			t.Errorf("ParseFloor(%q) = %d, want %d", l, got, want)
		}
	}
}

// TestFullDisk: a record whose write fails on a real full disk never takes
// effect, and the record written once there is room again reads back.
func TestFullDisk(t *testing.T) {
	fs := testfs.Tmpfs(t, 64<<10)
	s := Open(fs.Dir)
	if err := s.Append(rec(1)); err != nil {
		t.Fatal(err)
	}
	fs.Fill()
	big := rec(2)
	big.Errors = []string{strings.Repeat("ERROR: a long line\n", 1000)}
	if err := s.Append(big); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	fs.Free()
	if err := s.Append(rec(3)); err != nil {
		t.Fatal(err)
	}
	rs, _, err := s.Read()
	if err != nil || len(rs) != 2 || rs[0].Seq != 1 || rs[1].Seq != 3 {
		t.Fatalf("records %+v %v, want seqs 1 and 3", rs, err)
	}
}

// TestGluedLine: a line glued onto a torn one (two writers racing) is read.
func TestGluedLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "seed-index.jsonl")
	os.WriteFile(p, []byte(`{"v":1,"kind":"fold-index","seq":4,"spa`+`{"v":1,"kind":"fold-index","seq":5,"spans":[]}`+"\n"), 0o644)
	rs, floor, err := (&Store{path: p}).Read()
	if err != nil || len(rs) != 1 || rs[0].Seq != 5 || floor != 5 {
		t.Fatalf("%+v %d %v", rs, floor, err)
	}
}
