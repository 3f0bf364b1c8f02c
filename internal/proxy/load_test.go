package proxy

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// TestLoad: 50 conversations of 100 requests each, all at once, on
// loopback: every request reaches the upstream, each carries only its own
// conversation's outputs, each conversation folds in its own file, and the
// proxy's heap stays bounded.
func TestLoad(t *testing.T) {
	convs, turns := 50, 100
	if testing.Short() {
		convs, turns = 10, 30
	} else if raceOn {
		turns = 40 // the same concurrency; the full run is without -race
	}
	out := func(c, k int) string {
		var b strings.Builder
		for i := 0; i < 12; i++ {
			fmt.Fprintf(&b, "conv %d turn %d line %d: compiled module_%d.o ok (padding padding)\n", c, k, i, i)
		}
		return b.String()
	}
	body := func(c, n int) string {
		msgs := []any{map[string]any{"role": "user", "content": fmt.Sprintf("conversation %d", c)}}
		for k := 1; k <= n; k++ {
			id := fmt.Sprintf("c%d_%d", c, k)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "bash", "arguments": "{}"}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": out(c, k)})
		}
		return js(map[string]any{"model": "m", "messages": msgs, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}})
	}
	// The upstream checks each body as it arrives and keeps only counts,
	// so the heap measured after is the proxy's.
	var mu sync.Mutex
	got, folded := 0, 0
	var bad []string
	up := newUpstream(t, "up", nil)
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return // an abandoned prediction: no request
		}
		var own int
		fmt.Sscanf(r.Header.Get("x-session-id"), "ses_%d", &own)
		n, f, why := 0, 0, ""
		for id, text := range clients[0].outputs(t, b) {
			var oc, k int
			fmt.Sscanf(id, "c%d_%d", &oc, &k)
			switch {
			case oc != own:
				why = fmt.Sprintf("ses_%d carries %s of another conversation", own, id)
			case text == out(own, k):
			case codeRE.MatchString(text) && strings.Contains(text, fmt.Sprintf("conv %d turn %d", own, k)):
				f++
			default:
				why = fmt.Sprintf("ses_%d: %s is neither its output nor its digest: %q", own, id, text)
			}
			n++
		}
		mu.Lock()
		got++
		folded += f
		if why != "" {
			bad = append(bad, why)
		}
		mu.Unlock()
		w.Write([]byte("{}"))
	})
	dir := t.TempDir()
	base, stop := foldingFront(t, up, dir, 6_000)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, convs)
	for c := 0; c < convs; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for n := 1; n <= turns; n++ {
				req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body(c, n)))
				req.Header.Set("x-session-id", fmt.Sprintf("ses_%d", c))
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				res.Body.Close()
				if res.StatusCode != 200 {
					errs <- fmt.Errorf("conversation %d turn %d: status %d", c, n, res.StatusCode)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	took := time.Since(start)
	if got != convs*turns {
		t.Fatalf("%d requests reached the upstream, want %d", got, convs*turns)
	}
	for _, why := range bad {
		t.Error(why)
	}
	if folded == 0 {
		t.Fatal("nothing folded")
	}
	files, _ := foldstore.Files(dir)
	if len(files) != convs {
		t.Fatalf("%d conversation files, want %d", len(files), convs)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d conversations × %d requests in %v (%.0f requests/s); %d outputs went as digests; heap after GC %d MB, peak sys %d MB",
		convs, turns, took.Round(time.Millisecond), float64(convs*turns)/took.Seconds(), folded, ms.HeapAlloc>>20, ms.Sys>>20)
	// What stays is the conversations' state: each one's engine and its
	// last request (here about 100 KB each).
	if ms.HeapAlloc > 64<<20 {
		t.Errorf("heap %d MB after the run", ms.HeapAlloc>>20)
	}
}
