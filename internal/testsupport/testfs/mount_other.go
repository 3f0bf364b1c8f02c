//go:build !linux

package testfs

import (
	"runtime"
	"testing"
)

// Tmpfs skips the test: tmpfs is Linux's.
func Tmpfs(t testing.TB, size int) *FS {
	t.Helper()
	t.Skipf("testfs: no tmpfs on %s: the full-disk case is tested on Linux", runtime.GOOS)
	return nil
}

// TmpfsAt skips the test: tmpfs is Linux's.
func TmpfsAt(t testing.TB, dir string, size int) *FS { return Tmpfs(t, size) }
