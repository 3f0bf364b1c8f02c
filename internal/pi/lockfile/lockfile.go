// Package lockfile serialises read-modify-write of a file shared between
// processes (two Pi sessions saving settings at once). It uses the scheme
// of Pi's own settings lock (proper-lockfile): an exclusive "<file>.lock"
// directory, which mkdir creates atomically on every OS Go targets, so no
// flock or LockFileEx is needed; a lock older than Stale is taken over.
package lockfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// Stale is the age after which a lock is presumed abandoned (its holder
// died): proper-lockfile's default. Holders here keep it for milliseconds.
const Stale = 10 * time.Second

// Wait bounds how long Lock and Replace retry.
const Wait = 3 * time.Second

// Lock takes the lock for path and returns its release.
func Lock(path string) (unlock func(), err error) {
	dir := path + ".lock"
	deadline := time.Now().Add(Wait)
	for {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return func() { os.Remove(dir) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if st, serr := os.Stat(dir); serr == nil && time.Since(st.ModTime()) > Stale {
			os.Remove(dir) // abandoned; whoever recreates it first wins
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s: held by another process for over %v (remove %s if none is running)", path, Wait, dir)
		}
		time.Sleep(15 * time.Millisecond)
	}
}

// Replace renames tmp over path. On Windows a rename fails while another
// process has path open (a reader without FILE_SHARE_DELETE), so it is
// retried until Wait passes; elsewhere the first answer is final.
func Replace(tmp, path string) error {
	deadline := time.Now().Add(Wait)
	for {
		err := os.Rename(tmp, path)
		if err == nil || !retryRename || time.Now().After(deadline) {
			if err != nil {
				os.Remove(tmp)
			}
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
