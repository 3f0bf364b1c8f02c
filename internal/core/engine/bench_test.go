package engine

import (
	"fmt"
	"strings"
	"testing"
)

// benchSession returns a session of about n messages and ~1 KB per message:
// tool results of varied size with buried error lines, signed Anthropic
// thinking (which folds), text.
func benchSession(n int) [][]byte {
	s := newSession().user("work through the failing tests and fix them")
	s.api = "anthropic-messages"
	for i := 0; len(s.msgs) < n-1; i++ {
		id := fmt.Sprintf("toolu_%06d", i)
		thinking := ""
		if i%3 == 0 {
			thinking = strings.Repeat("Consider the failing assertion and where it is raised. ", 6)
		}
		s.call(thinking, id)
		lines := 4 + (i*7)%30
		s.result(id, output(id, lines), i%11 == 0)
	}
	return append(s.msgs, newSession().text("done").msgs[0])
}

func sizeOf(msgs [][]byte) int {
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	return n
}

// BenchmarkSteadyTurn is one request with no fold event on a 1,000-message
// (~1 MB) session, given only the newest message.
func BenchmarkSteadyTurn(b *testing.B) {
	msgs := benchSession(1000)
	e := New(shipped())
	// Fold once at a 200k window so the session carries frozen layers.
	e.Step(Request{Append: msgs[:len(msgs)-1], Window: 200_000, Reported: 150_000}, NopJournal{})
	if len(e.Layers()) == 0 {
		b.Fatal("setup: no layer")
	}
	last := msgs[len(msgs)-1]
	b.ReportMetric(float64(sizeOf(msgs))/1e6, "MB")
	b.ReportAllocs()
	for b.Loop() {
		res := e.Step(Request{Keep: len(msgs) - 1, Append: [][]byte{last}, Window: 200_000, Reported: 60_000}, NopJournal{})
		if res.Event != nil {
			b.Fatal("unexpected fold event")
		}
		// Dropping the message again is the benchmark's reset, not a
		// steady turn: a truncation re-indexes the whole session.
		b.StopTimer()
		e.Sync(len(msgs)-1, nil)
		b.StartTimer()
	}
}

// BenchmarkFoldEvent is one request that commits a fold event on a
// 1,000-message (~1 MB) session whose digests were prepared while idle.
func BenchmarkFoldEvent(b *testing.B) {
	msgs := benchSession(1000)
	folded := 0
	defer func() { b.ReportMetric(float64(folded), "blocks") }()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		e := New(shipped())
		e.Step(Request{Append: msgs[:len(msgs)-1], Window: 200_000, Paused: true}, NopJournal{})
		for e.Prepare(1 << 20) { // digests are prepared between requests
		}
		b.StartTimer()
		// Past the 150k budget: the schedule's urgent event.
		res := e.Step(Request{Keep: len(msgs) - 1, Append: msgs[len(msgs)-1:], Window: 200_000, Reported: 190_000}, NopJournal{})
		if res.Event == nil || len(res.Event.Folds) < 300 {
			b.Fatal("no full fold event")
		}
		folded = len(res.Event.Folds)
	}
}

// BenchmarkResume is the first request of a resumed 3,000-message session:
// replay nothing, decode everything, run the policy once.
func BenchmarkResume(b *testing.B) {
	msgs := benchSession(3000)
	b.ReportMetric(float64(sizeOf(msgs))/1e6, "MB")
	b.ReportAllocs()
	for b.Loop() {
		e := New(shipped())
		e.Step(Request{Append: msgs, Window: 1_000_000, Reported: 100_000}, NopJournal{})
	}
}
