package registry

import "testing"

func TestRegistry(t *testing.T) {
	r := New()
	if !r.Add(Record{ID: "r:a", Code: "aaaaaa", Seq: 2}) || !r.Add(Record{ID: "r:b", Code: "bbbbbb", Seq: 1}) {
		t.Fatal("add")
	}
	if r.Add(Record{ID: "r:c", Code: "aaaaaa", Seq: 3}) {
		t.Fatal("a colliding code was accepted")
	}
	if !r.Collides("r:c", "aaaaaa") || r.Collides("r:a", "aaaaaa") {
		t.Fatal("Collides")
	}
	if rec, ok := r.ByCode("bbbbbb"); !ok || rec.ID != "r:b" {
		t.Fatal("ByCode")
	}
	all := r.All()
	if len(all) != 2 || all[0].ID != "r:b" || all[1].ID != "r:a" {
		t.Fatalf("All order %v", all)
	}
	if b, l := Extent("a\nbé"); b != 5 || l != 2 {
		t.Fatalf("Extent = %d,%d", b, l)
	}
	if Sum("") != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatal("Sum")
	}
}
