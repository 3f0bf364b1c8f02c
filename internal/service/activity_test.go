package service

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/engine"
	"github.com/contextfold/contextfold/internal/rawjson"
)

// TestReadActivityAgreesWithUnmarshal: the in-place reading of a message's
// activity fields is encoding/json's, on well-formed and odd messages.
var activityCases = []string{
	`{"role":"assistant","content":[{"type":"text","text":"hi\n"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":3,"output":60,"cacheRead":1000,"cacheWrite":100,"totalTokens":1163,"cost":{"input":0,"total":0.1}},"stopReason":"toolUse","timestamp":1796000000000,"responseId":"msg_1"}`,
	`{"role":"toolResult","toolCallId":"c1","content":[{"type":"text","text":"ok"}],"timestamp":1796000000800}`,
	`{"role":"assistant","usage":null,"timestamp":1.5e12}`,
	`{"role":"assistant","usage":{"input":1.5},"timestamp":1}`,
	`{"role":"assistant","usage":{"Input":7},"timestamp":1}`,
	`{"role":"assistant","usage":{"input":7,"input":8},"timestamp":1}`,
	`{"role":"assistant","usage":{"input":null,"at":12,"provider":"p","stopReason":"x"},"timestamp":1}`,
	`{"role":"assistant","usage":{"input":"7"},"timestamp":1}`,
	`{"role":"assistant","usage":[1],"timestamp":1}`,
	`{"role":"assistant","usage":{},"timestamp":"x"}`,
	`{"role":"assistant","usage":{},"timestamp":null,"provider":null}`,
	`{"Role":"assistant","usage":{}}`,
	`{"role":"assistant","role":"user","usage":{}}`,
	`{"role":"assistant","usage":{},"provider":"a\u0062c","model":"m\u00e9"}`,
	`{"role":"assistant","usage":{},"provider":"\ud800"}`,
	`{"role":5,"usage":{}}`,
	`{"role":"assistant","usage":{"input":99999999999999999999}}`,
	`{"role":"assistant","usage":{"input":-3,"cacheRead":2},"timestamp":-0}`,
	`{"role":"assistant","usage":{"input":1},"timestamp":1e400}`,
	`{"role":"assistant","stopreason":"error","usage":{}}`,
	`[1]`,
	`{"role":"assistant"`,
	`{"role":"assistant","ſtopReason":"error","usage":{}}`,
}

func TestReadActivityAgreesWithUnmarshal(t *testing.T) {
	for _, m := range activityCases {
		if rawjson.Valid([]byte(m)) {
			checkActivity(t, []byte(m))
		}
	}
}

func checkActivity(t *testing.T, raw []byte) {
	t.Helper()
	var want activity
	wantErr := json.Unmarshal(raw, &want)
	got, err := readActivity(raw)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, encoding/json %v", raw, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v %+v\nwant %+v %+v", raw, got, got.Usage, want, want.Usage)
	}
}

func FuzzReadActivity(f *testing.F) {
	for _, c := range activityCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if utf8.Valid(raw) && rawjson.Valid(raw) { // the ledger hands it valid JSON only
			checkActivity(t, raw)
		}
	})
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

// TestDecodeEntryAgreesWithUnmarshal: the in-place entry decoder is
// encoding/json's.
func TestDecodeEntryAgreesWithUnmarshal(t *testing.T) {
	for _, c := range entryCases {
		if rawjson.Valid([]byte(c)) {
			checkEntry(t, []byte(c))
		}
	}
}

func checkEntry(t *testing.T, raw []byte) {
	t.Helper()
	var want engine.Entry
	wantErr := json.Unmarshal(raw, &want)
	got, err := decodeEntry(raw)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, encoding/json %v", raw, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %#v\nwant %#v", raw, got, want)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	for _, c := range entryCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !utf8.Valid(raw) || !rawjson.Valid(raw) {
			return // decodeEntry is handed valid JSON only (and the two agree on validity for UTF-8)
		}
		checkEntry(t, raw)
	})
}
