package block

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// BenchmarkDecodeToolResult decodes a 20 KB tool result as Pi sends it.
func BenchmarkDecodeToolResult(b *testing.B) {
	var sb strings.Builder
	for k := 0; sb.Len() < 20_000; k++ {
		fmt.Fprintf(&sb, "toolu_1 line %d: the quick brown fox jumps over the lazy dog %d\n", k, k*17)
	}
	raw := []byte(`{"role":"toolResult","toolCallId":"toolu_1","toolName":"bash","content":[{"type":"text","text":` + rawjson.QuoteString(sb.String()) + `}],"isError":false,"timestamp":1796000000800}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		Decode(raw, 3)
	}
}
