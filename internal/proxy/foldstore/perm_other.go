//go:build !unix

package foldstore

// private leaves dir as it is: on Windows a user's application data is
// private to the user by its ACL, which the store does not change.
func private(dir string) error { return nil }
