// Package parallel splits independent per-item work over the machine's
// cores. The callers keep their results by index and consume them in
// order afterwards, so the outcome never depends on scheduling.
package parallel

import (
	"runtime"
	"sync"
)

// For calls f(lo, hi) over consecutive ranges that together cover [0, n),
// concurrently when there are at least least items per goroutine, and
// returns when every call has. f must only write state owned by its range.
func For(n, least int, f func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if least < 1 {
		least = 1
	}
	if w := n / least; w < workers {
		workers = w
	}
	if workers <= 1 {
		if n > 0 {
			f(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			f(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	f(0, min(chunk, n))
	wg.Wait()
}
