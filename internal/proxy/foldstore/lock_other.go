//go:build !unix && !windows

package foldstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// lock creates path exclusively. Without an OS lock that dies with its
// holder, a crashed writer leaves it behind, to be removed by hand.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w (%s; remove it if no proxy runs)", ErrLocked, path)
		}
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	f.Close()
	return func() { os.Remove(path) }, nil
}
