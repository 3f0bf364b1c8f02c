package seedindex

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/risk"
)

// benchTexts are tool outputs of two shapes: test-runner lines with a
// buried error, and source code (this module's own, as a file read
// returns it).
func benchTexts(b *testing.B) map[string][]string {
	var runner []string
	for i := 0; i < 200; i++ {
		var sb strings.Builder
		for k := 0; sb.Len() < 2000; k++ {
			if k == 2 {
				fmt.Fprintf(&sb, "ERROR: test_%d failed at step %d (tests/test_%d.py:%d)\n", i, k, i, 40+k)
				continue
			}
			fmt.Fprintf(&sb, "toolu_%d line %d: the quick brown fox jumps over the lazy dog %d\n", i, k, (i*31+k*17)%1000)
		}
		runner = append(runner, sb.String())
	}
	var code []string
	files, _ := filepath.Glob("../*/*.go")
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && len(code) < 200 {
			code = append(code, string(data))
		}
	}
	if len(code) == 0 {
		b.Fatal("no source files")
	}
	return map[string][]string{"runner": runner, "code": code}
}

// BenchmarkExtract is the seed-index and risk work a block's digest needs
// (engine.ensureMeta without the digest itself), per MB of output.
func BenchmarkExtract(b *testing.B) {
	for name, texts := range benchTexts(b) {
		b.Run(name, func(b *testing.B) {
			n := 0
			for _, t := range texts {
				n += len(t)
			}
			b.SetBytes(int64(n))
			for b.Loop() {
				for _, t := range texts {
					ExtractLines(t, risk.Lines(t, risk.Warning))
				}
			}
		})
	}
}
