// Package testfs gives tests a real filesystem that runs out of space: a
// small tmpfs mounted for the test, which Fill fills to ENOSPC and Free
// empties again. Tests use it to check that a full disk costs no record.
// Mounting needs the privilege to mount (root, or CAP_SYS_ADMIN); where
// the machine cannot mount one, the test is skipped with the reason.
package testfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// FS is a mounted tmpfs.
type FS struct {
	t testing.TB
	// Dir is the mount point.
	Dir string
}

// filler is the file Fill grows until the filesystem is full.
const filler = ".filler"

// Fill fills the filesystem: every later write that needs a new page
// fails with ENOSPC. Bytes left in the last page of a file already there
// can still be written, so a large write to such a file lands in part.
func (fs *FS) Fill() {
	fs.t.Helper()
	f, err := os.OpenFile(filepath.Join(fs.Dir, filler), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fs.t.Fatalf("testfs: %v", err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			fs.t.Fatalf("testfs: fill: %v", err)
		}
	}
	// Smaller writes take the last bytes a partial page of the filler left.
	for _, n := range []int{1024, 64, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
}

// Free removes what Fill wrote.
func (fs *FS) Free() {
	fs.t.Helper()
	if err := os.Remove(filepath.Join(fs.Dir, filler)); err != nil && !errors.Is(err, os.ErrNotExist) {
		fs.t.Fatalf("testfs: free: %v", err)
	}
}
