package service

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/rawjson"
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
