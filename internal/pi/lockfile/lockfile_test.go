package lockfile

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestLockSerialises: increments under the lock are never lost.
func TestLockSerialises(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	os.WriteFile(path, []byte("0"), 0o644)
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := Lock(path)
			if err != nil {
				t.Error(err)
				return
			}
			defer unlock()
			b, _ := os.ReadFile(path)
			n, _ := strconv.Atoi(string(b))
			time.Sleep(time.Millisecond)
			tmp := path + ".tmp"
			os.WriteFile(tmp, []byte(strconv.Itoa(n+1)), 0o644)
			if err := Replace(tmp, path); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if b, _ := os.ReadFile(path); string(b) != "40" {
		t.Fatalf("counter = %s, want 40", b)
	}
	if _, err := os.Stat(path + ".lock"); !os.IsNotExist(err) {
		t.Fatalf("lock left behind: %v", err)
	}
}

// TestStaleLockTakenOver: a lock whose holder died is taken over.
func TestStaleLockTakenOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.Mkdir(path+".lock", 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * Stale)
	os.Chtimes(path+".lock", old, old)
	unlock, err := Lock(path)
	if err != nil {
		t.Fatalf("stale lock not taken over: %v", err)
	}
	unlock()
}

// TestHeldLockWaits: Lock waits for a live holder to release.
func TestHeldLockWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	unlock, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		released <- time.Now()
		unlock()
	}()
	unlock2, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	unlock2()
	if at := <-released; got.Before(at) {
		t.Fatal("second Lock returned while the first was held")
	}
}
