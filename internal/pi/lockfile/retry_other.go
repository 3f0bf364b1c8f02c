//go:build !windows

package lockfile

// retryRename: POSIX rename replaces an open file; a failure is final.
const retryRename = false
