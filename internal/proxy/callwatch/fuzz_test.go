package callwatch

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzWant wants names that do not start with "x", so the fuzzer sees
// both kinds.
func fuzzWant(name string) bool { return !strings.HasPrefix(name, "x") }

// FuzzWatcher feeds arbitrary bodies in arbitrary chunks: a Watcher never
// panics, the chunking never changes what it reports, and what it reports
// keeps to the want filter and the limits.
func FuzzWatcher(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for format := range 3 {
			f.Add(body, uint8(format), true, uint64(len(body)))
		}
	}
	for i, tt := range handcrafted {
		f.Add([]byte(tt.body), uint8(tt.f), tt.stream, uint64(i))
	}
	f.Fuzz(func(t *testing.T, body []byte, format uint8, stream bool, seed uint64) {
		fm := Format(format % 3)
		whole := watch(fm, stream, fuzzWant, [][]byte{body})
		for _, c := range whole {
			if c.ID == "" || !fuzzWant(c.Name) || len(c.ID) > maxName || len(c.Name) > maxName || len(c.Args) > MaxArgs {
				t.Fatalf("reported %s", show([]Call{c}))
			}
		}
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		var cuts []int
		for i := 1; i < len(body); i++ {
			if rng.IntN(4) == 0 {
				cuts = append(cuts, i)
			}
		}
		if got := watch(fm, stream, fuzzWant, split(body, cuts)); !sameCalls(got, whole) {
			t.Fatalf("cuts %v: got %s\nwhole %s", cuts, show(got), show(whole))
		}
		// Nor what usage it reports, which never counts below zero.
		wu, wn, wc := watchBoth(fm, stream, fuzzWant, [][]byte{body})
		if !sameCalls(wc, whole) {
			t.Fatalf("with usage watched: calls %s\nwithout %s", show(wc), show(whole))
		}
		if u, n, c := watchBoth(fm, stream, fuzzWant, split(body, cuts)); u != wu || n != wn || n > 1 || !sameCalls(c, whole) {
			t.Fatalf("cuts %v: usage %+v (%d), whole %+v (%d); calls %s", cuts, u, n, wu, wn, show(c))
		}
		if wu.Input < 0 || wu.CacheRead < 0 || wu.CacheWrite < 0 || wu.Output < 0 {
			t.Fatalf("usage %+v", wu)
		}
		ones := make([]int, 0, len(body))
		for i := 1; i < len(body); i++ {
			ones = append(ones, i)
		}
		if got := watch(fm, stream, fuzzWant, split(body, ones)); !sameCalls(got, whole) {
			t.Fatalf("1-byte chunks: got %s\nwhole %s", show(got), show(whole))
		}
	})
}

// FuzzWatcherFraming rewrites the sample streams with other legal SSE
// framing, chosen by seed: each line ending LF, CRLF or CR, "data:" with or
// without its space, comment, event:, id: and retry: lines added, an
// event's JSON split over two data lines, a BOM; then cuts the result at
// random points. The calls reported must be the sample's.
func FuzzWatcherFraming(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	formats := map[string]Format{"anthropic": Messages, "responses": Responses, "chat": Chat}
	type sample struct {
		f     Format
		body  []byte
		want  []Call
		usage Usage
	}
	var samples []sample
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		fm := formats[strings.SplitN(filepath.Base(name), "-", 2)[0]]
		u, _ := watchUsage(fm, true, [][]byte{body})
		samples = append(samples, sample{fm, body, watch(fm, true, nil, [][]byte{body}), u})
	}
	for i := range samples {
		f.Add(uint8(i), uint64(i))
	}
	f.Fuzz(func(t *testing.T, which uint8, seed uint64) {
		s := samples[int(which)%len(samples)]
		rng := rand.New(rand.NewPCG(seed, 1))
		var b strings.Builder
		if rng.IntN(4) == 0 {
			b.WriteString("\xEF\xBB\xBF")
		}
		ends := []string{"\n", "\r\n", "\r"}
		prevCR := false
		end := func() string { e := ends[rng.IntN(3)]; prevCR = e == "\r"; return e }
		for _, line := range strings.Split(strings.TrimSuffix(string(s.body), "\n"), "\n") {
			switch rng.IntN(8) {
			case 0:
				b.WriteString(": keep-alive" + end())
			case 1:
				b.WriteString("id: 7" + end() + "retry: 100" + end())
			case 2:
				b.WriteString("event: something" + end())
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				sp := []string{"", " "}[rng.IntN(2)]
				if strings.HasPrefix(v, "{") && rng.IntN(3) == 0 {
					b.WriteString("data:" + sp + "{" + end())
					v = v[1:]
				}
				line = "data:" + sp + v
			}
			if line == "" && prevCR {
				// CR then LF would be one line end: the blank line
				// needs a CR of its own.
				e := []string{"\r", "\r\n"}[rng.IntN(2)]
				b.WriteString(e)
				prevCR = e == "\r"
				continue
			}
			b.WriteString(line + end())
		}
		body := []byte(b.String())
		var cuts []int
		for i := 1; i < len(body); i++ {
			if rng.IntN(16) == 0 {
				cuts = append(cuts, i)
			}
		}
		if got := watch(s.f, true, nil, split(body, cuts)); !sameCalls(got, s.want) {
			t.Fatalf("got %s\nwant %s\nbody %q", show(got), show(s.want), body)
		}
		if u, n, c := watchBoth(s.f, true, nil, split(body, cuts)); u != s.usage || n != 1 || !sameCalls(c, s.want) {
			t.Fatalf("usage %+v (%d), want %+v; calls %s\nbody %q", u, n, s.usage, show(c), body)
		}
	})
}
