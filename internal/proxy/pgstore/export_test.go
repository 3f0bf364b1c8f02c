package pgstore

import "time"

// Applied is how many migrations Open applied.
func Applied(s *Store) int { return s.applied }

// SetNow sets the store's clock: a conversation's creation time.
func SetNow(s *Store, now func() time.Time) { s.now = now }
