//go:build !unix

package bench

import "runtime"

// peakRSS approximates the peak memory with the Go runtime's total.
func peakRSS() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.Sys) / (1 << 20)
}
