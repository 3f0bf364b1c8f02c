package fakellm

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
)

// signingKey is the key every fake signature is minted under. It is fixed so
// that a session recorded against one server verifies against the next one
// (a resumed Pi session replays blocks minted by an earlier process).
var signingKey = []byte("fakellm signing key: not a secret")

// sign returns base64(HMAC-SHA256(signingKey, len-prefixed parts)). Each
// part is length-prefixed so that no two part lists collide.
func sign(parts ...[]byte) string {
	m := hmac.New(sha256.New, signingKey)
	var n [8]byte
	for _, p := range parts {
		l := uint64(len(p))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		m.Write(n[:])
		m.Write(p)
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// verify reports whether sig is sign(parts...), in constant time.
func verify(sig string, parts ...[]byte) bool {
	return hmac.Equal([]byte(sig), []byte(sign(parts...)))
}

// reencode decodes JSON and encodes it again with sorted keys, no
// insignificant whitespace and no HTML escaping, after f (when set) edits
// the value; invalid JSON comes back as is.
func reencode(raw []byte, f func(any) any) []byte {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return raw
	}
	if f != nil {
		v = f(v)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// chain extends a prefix hash by one canonical item.
func chain(prev [32]byte, canon []byte) [32]byte {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(canon)
	var out [32]byte
	h.Sum(out[:0])
	return out
}
