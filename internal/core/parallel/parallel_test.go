package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestForCoversEachIndexOnce: every index in [0, n) is visited exactly
// once, for sizes around the split points and any worker count.
func TestForCoversEachIndexOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3, 8} {
		runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 2, 7, 31, 32, 33, 64, 1000} {
			for _, min := range []int{0, 1, 16, 32} {
				seen := make([]int32, n)
				var calls atomic.Int32
				For(n, min, func(lo, hi int) {
					calls.Add(1)
					if lo >= hi {
						t.Errorf("procs %d n %d min %d: empty range [%d,%d)", procs, n, min, lo, hi)
					}
					for i := lo; i < hi; i++ {
						atomic.AddInt32(&seen[i], 1)
					}
				})
				for i, c := range seen {
					if c != 1 {
						t.Fatalf("procs %d n %d min %d: index %d visited %d times", procs, n, min, i, c)
					}
				}
				if n == 0 && calls.Load() != 0 {
					t.Errorf("n 0: %d calls", calls.Load())
				}
				if m := max(min, 1); n < 2*m && calls.Load() > 1 {
					t.Errorf("procs %d n %d min %d: split into %d calls below the minimum", procs, n, min, calls.Load())
				}
			}
		}
	}
}
