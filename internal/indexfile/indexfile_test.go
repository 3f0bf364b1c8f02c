package indexfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/contextfold/contextfold/internal/seedindex"
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
