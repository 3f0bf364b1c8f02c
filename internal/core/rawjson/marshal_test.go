package rawjson

import (
	"encoding/json"
	"testing"
)

type inner struct {
	X int `json:"x"`
}

type sample struct {
	inner
	Name  string            `json:"name"`
	Empty string            `json:"empty,omitempty"`
	Skip  int               `json:"-"`
	F     float64           `json:"f"`
	List  []string          `json:"list"`
	Nil   []string          `json:"nil"`
	M     map[string]int    `json:"m"`
	Raw   json.RawMessage   `json:"raw"`
	P     *inner            `json:"p,omitempty"`
	Any   any               `json:"any"`
	Deep  map[string][]bool `json:"deep,omitempty"`
}

func TestMarshal(t *testing.T) {
	v := sample{inner: inner{X: 1}, Name: "a<b>&\xed\xa0\x80", Skip: 9, F: 0.541, List: []string{"é"},
		M: map[string]int{"z": 1, "a": 2}, Raw: json.RawMessage(`{"k":[1]}`), Any: 3}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"x":1,"name":"a<b>&\ud800","f":0.541,"list":["é"],"nil":null,"m":{"a":2,"z":1},"raw":{"k":[1]},"any":3}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Without surrogates the output is what encoding/json (minus HTML escaping) gives.
	v.Name = "plain"
	std, _ := json.Marshal(v)
	mine, _ := Marshal(v)
	var a, b any
	json.Unmarshal(std, &a)
	json.Unmarshal(mine, &b)
	if string(mustJSON(a)) != string(mustJSON(b)) {
		t.Fatalf("differs from encoding/json:\n%s\n%s", std, mine)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }
