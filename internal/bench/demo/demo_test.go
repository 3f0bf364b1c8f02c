package demo

import (
	"bytes"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/registry"
)

// TestExcerpt: text is printed whole and said to be, or cut and the note
// says how many lines and bytes are not shown.
func TestExcerpt(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		head, tail int
		width      int
		shown      []string // the │ rows
		note       string
	}{
		{"whole", "a\nbb\nccc", 2, 2, 10, []string{"a", "bb", "ccc"}, "(shown whole: 3 lines, 8 bytes)"},
		{"one line", "abc\n", 2, 2, 10, []string{"abc"}, "(shown whole: 1 line, 4 bytes)"},
		// rows 2-4 skipped: "b2\n" "b3\n" "b4\n" = 9 bytes
		{"lines cut", "a1\nb2\nb3\nb4\nc5", 1, 1, 10, []string{"a1", "c5"}, "(cut: 3 of 5 lines not shown, 9 of 14 bytes)"},
		// "é" is two bytes: the two characters past the third, 4 bytes, are not shown.
		{"long line", "ééééé\nx", 1, 1, 3, []string{"ééé…", "x"}, "(cut: the ends of 1 lines longer than 3 characters (marked …) not shown, 4 of 12 bytes)"},
		{"both", "0123456789\nskip\nend", 1, 1, 4, []string{"0123…", "end"}, "(cut: 1 of 3 lines and the ends of 1 lines longer than 4 characters (marked …) not shown, 11 of 19 bytes)"},
	} {
		var b bytes.Buffer
		excerpt(&b, tc.text, tc.head, tc.tail, tc.width)
		var rows []string
		note := ""
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			switch {
			case strings.HasPrefix(l, "  │ "):
				rows = append(rows, strings.TrimPrefix(l, "  │ "))
			case strings.HasPrefix(l, "  ("):
				note = strings.TrimPrefix(l, "  ")
			}
		}
		if strings.Join(rows, "|") != strings.Join(tc.shown, "|") || note != tc.note {
			t.Errorf("%s: rows %q note %q, want %q %q", tc.name, rows, note, tc.shown, tc.note)
		}
	}
}

// TestTypical: the typical fold is the one holding the median folded
// byte, in ratio order.
func TestTypical(t *testing.T) {
	mk := func(bytes ...int) []fold {
		var out []fold
		for _, n := range bytes {
			out = append(out, fold{rec: &registry.Record{Bytes: n, Digest: "xx"}})
		}
		return out
	}
	for _, tc := range []struct {
		bytes []int
		want  int
	}{
		{[]int{10, 10, 10}, 1},      // 20 of 30 reaches half at the second
		{[]int{1, 1, 1, 1, 100}, 4}, // the large one holds most bytes
		{[]int{50, 10, 40}, 0},      // 50 of 100 is half
		{[]int{7}, 0},
	} {
		mid, total, orig, digs := typical(mk(tc.bytes...))
		sum := 0
		for _, n := range tc.bytes {
			sum += n
		}
		if mid != tc.want || total != sum || orig != sum || digs != 2*len(tc.bytes) {
			t.Errorf("%v: typical %d (total %d, %d → %d), want %d", tc.bytes, mid, total, orig, digs, tc.want)
		}
	}
}
