package engine

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/golden/<name>, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; run go test -update and review the diff", path)
	}
}

// TestGoldenFoldEvents pins the exact fold events, digests and seed-index
// records the shipped policy produces on the bundled real sessions.
func TestGoldenFoldEvents(t *testing.T) {
	files, err := filepath.Glob("../../../testdata/trajectories/*/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatal("no sample trajectories")
	}
	for _, f := range files {
		for _, window := range []int{32_000, 128_000} {
			msgs := loadPi(t, f)
			e := New(shipped())
			j := &memJournal{}
			turns := drive(t, e, msgs, window, j)
			var b bytes.Buffer
			fmt.Fprintf(&b, "# %s at window %d: %d requests, %d fold events\n", filepath.Base(f), window, len(turns), len(j.events))
			for k, tn := range turns {
				ev := tn.res.Event
				if ev == nil {
					continue
				}
				fmt.Fprintf(&b, "\n## event %d (%s) at request %d, %d blocks\n", ev.Seq, ev.Trigger, k, len(ev.Folds))
				for _, rec := range ev.Folds {
					fmt.Fprintf(&b, "- %s %s %dB %dL sha256:%s\n  %s\n", rec.ID, rec.Code, rec.Bytes, rec.Lines, rec.SHA256[:16], strings.ReplaceAll(rec.Digest, "\n", "\n  "))
				}
				idx, _ := json.MarshalIndent(ev.Index, "", " ")
				fmt.Fprintf(&b, "seed index:\n%s\n", idx)
			}
			name := fmt.Sprintf("%s.%dk.txt", strings.TrimSuffix(filepath.Base(f), ".jsonl"), window/1000)
			golden(t, name, b.Bytes())
		}
	}
}
