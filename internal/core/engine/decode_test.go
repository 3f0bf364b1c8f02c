package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// TestDecodeEntryAgreesWithUnmarshal: the in-place entry decoder is
// encoding/json's, but for lone surrogates.
func TestDecodeEntryAgreesWithUnmarshal(t *testing.T) {
	for _, c := range entryCases {
		if rawjson.Valid([]byte(c)) {
			checkEntry(t, []byte(c))
		}
	}
}

// entryCases are fold entries as the engine writes them and odd ones.
var entryCases = []string{
	`{"v":1,"kind":"fold","seq":3,"trigger":"threshold","folds":[{"id":"r:c1","code":"abc123","seq":3,"bytes":120,"lines":4,"sha256":"00ff","tool":"bash","kind":"tool_result","isError":true,"turn":2,"fullOutputPath":"/tmp/x","digest":"{#abc123 FOLDED}\nERROR: é 😀 \"q\"\\ \u2028","compacted":false}],"thinking":{"invalidated":2,"folded":1,"dropped":1,"lost":["a:r1:p0",null]}}`,
	`{"v":1,"kind":"unfold","ids":["r:c1","r:c2"]}`,
	`{"v":1,"kind":"void","seq":4}`,
	`{"v":1,"kind":"fold","seq":5,"folds":[]}`,
	`{"v":1,"kind":"fold","seq":5,"folds":null,"thinking":null,"ids":[]}`,
	`{"v":1,"kind":"fold","seq":5,"folds":[null,{"id":"x"}]}`,
	`{"v":1,"kind":"fold","seq":5,"folds":[{"digest":"lone \ud800 here"}]}`,
	`{"v":1,"kind":"fold","seq":5,"folds":[{"digest":"pair \ud83d\ude00"}]}`,
	`{"v":1,"kind":"fold","seq":5,"folds":[{"ID":"x","id":"y"}]}`,
	`{"v":1,"kind":"fold","seq":5,"folds":[{"id":"x","id":"y"}]}`,
	`{"v":1.0,"kind":"fold"}`,
	`{"V":2,"kind":"fold"}`,
	`{"v":1,"kind":"fold","seq":"5"}`,
	`{"v":1,"kind":"fold","folds":{}}`,
	`{"v":1,"kind":"fold","folds":[{"isError":1}]}`,
	`{"v":1,"kind":"fold","thinking":{"lost":"x"}}`,
	`{"v":1,"kind":"fold","extra":{"deep":[1,2,{"v":9}]},"seq":7}`,
	`{"kind":"fold","entry":{"blockId":"b1","code":"c"}}`,
	`{"v":1,"kind":"fold"`,
	`[]`,
}

// checkEntry compares DecodeEntry with json.Unmarshal. The two part ways
// only on lone surrogates: WTF-8 against U+FFFD.
func checkEntry(t *testing.T, raw []byte) {
	t.Helper()
	var want Entry
	wantErr := json.Unmarshal(raw, &want)
	got, err := DecodeEntry(raw)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, encoding/json %v", raw, err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.Contains(bytes.ToLower(raw), []byte(`\ud`)) {
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %#v\nwant %#v", raw, got, want)
		}
		return
	}
	// Written back as JSON.stringify would and read by encoding/json, each
	// lone surrogate becomes the U+FFFD encoding/json gave it.
	g, err := rawjson.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var norm Entry
	if err := json.Unmarshal(g, &norm); err != nil || !reflect.DeepEqual(norm, want) {
		t.Fatalf("%s:\n got %#v\nwant %#v", raw, norm, want)
	}
}

// TestDecodeEntryKeepsLoneSurrogates: a digest or id holding a lone
// surrogate replays to the bytes that were sent.
func TestDecodeEntryKeepsLoneSurrogates(t *testing.T) {
	raw := `{"v":1,"kind":"fold","seq":5,"folds":[{"id":"r:\ud83d","code":"abc123","digest":"half \ud83d an emoji, lone \udc00, pair \ud83d\ude00"}],"ids":["\ud800"]}`
	en, err := DecodeEntry([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if en.Folds[0].ID != "r:\xed\xa0\xbd" || en.IDs[0] != "\xed\xa0\x80" {
		t.Fatalf("ids %q %q: lone surrogates not kept as WTF-8", en.Folds[0].ID, en.IDs[0])
	}
	out, err := rawjson.Marshal(en)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"digest":"half \ud83d an emoji, lone \udc00, pair 😀"`)) {
		t.Fatalf("re-encoded %s", out)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	for _, c := range entryCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !utf8.Valid(raw) || !rawjson.Valid(raw) {
			return // DecodeEntry is handed valid JSON only (and the two agree on validity for UTF-8)
		}
		checkEntry(t, raw)
	})
}
