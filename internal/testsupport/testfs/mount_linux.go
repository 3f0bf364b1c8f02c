package testfs

import (
	"fmt"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes on a new directory for the test and
// unmounts it when the test ends. It skips the test when the machine
// cannot mount one.
func Tmpfs(t testing.TB, size int) *FS {
	t.Helper()
	return TmpfsAt(t, t.TempDir(), size)
}

// TmpfsAt is Tmpfs on the existing directory dir.
func TmpfsAt(t testing.TB, dir string, size int) *FS {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("testfs: cannot mount a tmpfs here (%v): the full-disk case needs the privilege to mount", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("testfs: unmount %s: %v", dir, err)
		}
	})
	return &FS{t: t, Dir: dir}
}
