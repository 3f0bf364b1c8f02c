package proxy

import (
	"testing"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/testsupport/testfs"
)

// TestFullDisk: with the store on a real filesystem that fills up in the
// middle of a conversation, no fold goes out whose records did not land
// (the requests go out with the folds committed before), folding resumes
// once there is room, and every code the upstream ever saw reads back
// from the store, verified. Before, the first output of the event after
// the full disk could not be read back, yet its digest was sent.
func TestFullDisk(t *testing.T) {
	for _, cl := range clients {
		t.Run(string(cl.api), func(t *testing.T) {
			fs := testfs.Tmpfs(t, 512<<10)
			up := newUpstream(t, "up", nil)
			base, stop := foldingFront(t, up, fs.Dir, 40_000)
			defer stop()
			seen := map[string]bool{}
			codesSent := func() int {
				reqs := up.requests()
				for _, text := range cl.outputs(t, reqs[len(reqs)-1].body) {
					if m := codeRE.FindStringSubmatch(text); m != nil {
						seen[m[1]] = true
					}
				}
				return len(seen)
			}
			n := 0
			for n < 12 || codesSent() == 0 {
				n++
				send(t, base, cl.path, cl.body(n))
			}
			fs.Fill()
			before := codesSent()
			for range 12 {
				n++
				send(t, base, cl.path, cl.body(n))
				if got := codesSent(); got != before {
					t.Fatalf("turn %d, disk full: %d codes reached the upstream, %d before", n, got, before)
				}
			}
			fs.Free()
			for range 12 {
				n++
				send(t, base, cl.path, cl.body(n))
			}
			if codesSent() == before {
				t.Fatal("folding did not resume once there was room")
			}
			files, _ := foldstore.Files(fs.Dir)
			if len(files) != 1 {
				t.Fatalf("%d conversation files", len(files))
			}
			contents, err := foldstore.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			recs := contents.Records()
			for code := range seen {
				rec, ok := recs[code]
				st, has := contents.Texts[rec.ID]
				if !ok || !has || !st.Verified(&rec) {
					t.Errorf("code %s was sent but does not read back: record %v, text %v, verified %v", code, ok, has, st.Verified(&rec))
				}
			}
		})
	}
}
