package rawjson

import "strings"

// Members reads the members of a valid JSON object for a decoder that
// must read it as encoding/json would: each member whose key is one of
// names, exactly, is passed to set with its index in names; null values
// are skipped, as encoding/json leaves the field zero. It reports false,
// for the caller to fall back to encoding/json, on a repeated key, on a key
// equal to one of names in another case (encoding/json matches keys
// case-insensitively), or when set does. names holds at most 64 keys.
func Members(raw []byte, names []string, set func(k int, v []byte) bool) bool {
	ms, err := ObjectOfValid(raw)
	if err != nil {
		return false
	}
	var seen uint64
	for _, m := range ms {
		k := -1
		for i, n := range names {
			if m.Key == n {
				k = i
				break
			}
		}
		if k < 0 {
			if FoldsTo(m.Key, names...) {
				return false
			}
			continue
		}
		if seen&(1<<k) != 0 {
			return false
		}
		seen |= 1 << k
		if IsNull(m.Value) {
			continue
		}
		if !set(k, m.Value) {
			return false
		}
	}
	return true
}

// FoldsTo reports whether key equals one of names ignoring case.
func FoldsTo(key string, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(key, n) {
			return true
		}
	}
	return false
}

// Strings decodes a JSON array of strings (nulls are ""), lone surrogates
// kept as WTF-8 (see Unquote). [] is empty but not nil, as encoding/json
// has it.
func Strings(raw []byte) ([]string, bool) {
	return ArrayOf(raw, func(v []byte) (string, bool) {
		if !IsString(v) {
			return "", false
		}
		s, err := Unquote(v)
		return s, err == nil
	})
}

// ArrayOf decodes a valid JSON array with el, as encoding/json into a
// slice does: [] is empty but not nil, and a null element is the zero
// value.
func ArrayOf[T any](raw []byte, el func([]byte) (T, bool)) ([]T, bool) {
	els, err := ArrayOfValid(raw)
	if err != nil {
		return nil, false
	}
	out := make([]T, len(els))
	for i, e := range els {
		if IsNull(e) {
			continue
		}
		v, ok := el(e)
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// String decodes a string literal, lone surrogates kept as WTF-8.
func String(raw []byte) (string, bool) {
	if !IsString(raw) {
		return "", false
	}
	s, err := Unquote(raw)
	return s, err == nil
}

// BoolOf decodes true or false.
func BoolOf(raw []byte) (v, ok bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
