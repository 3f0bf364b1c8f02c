//go:build unix

package foldstore

import (
	"fmt"
	"os"
	"syscall"
)

// private makes dir readable by its owner alone: the store holds every
// folded tool output, which may hold anything a tool printed. A directory
// this user owns is tightened to 0700; one that another user owns, and
// that others can read, is refused.
func private(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("foldstore: %w", err)
	}
	if st.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("foldstore: %s is %v and owned by another user (uid %d): others could read the folded outputs; use a directory of your own (-store)", dir, st.Mode().Perm(), sys.Uid)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("foldstore: make %s private: %w", dir, err)
	}
	return nil
}
