//go:build windows

package foldstore

import (
	"errors"
	"fmt"
	"syscall"
)

// errSharingViolation is ERROR_SHARING_VIOLATION, which package syscall
// does not name.
const errSharingViolation syscall.Errno = 32

// lock opens path with no sharing: a second open fails while this process
// holds it, and Windows closes it when the process ends.
func lock(path string) (func(), error) {
	p, err := syscall.UTF16PtrFromString(path)
	if err != nil {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	h, err := syscall.CreateFile(p, syscall.GENERIC_READ|syscall.GENERIC_WRITE, 0, nil, syscall.OPEN_ALWAYS, syscall.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		if errors.Is(err, errSharingViolation) {
			return nil, fmt.Errorf("%w (%s)", ErrLocked, path)
		}
		return nil, fmt.Errorf("foldstore: lock %s: %w", path, err)
	}
	return func() { syscall.CloseHandle(h) }, nil
}
