package rawjson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Marshal encodes v as compact JSON the way JavaScript's JSON.stringify
// would: strings go through Quote, so lone surrogates kept as WTF-8 come out
// as \uXXXX escapes (encoding/json would replace them with U+FFFD) and <, >
// and & are not escaped. It understands the subset of encoding/json the
// engine uses: structs with json tags (name, omitempty, "-"), embedded
// structs, pointers, slices, arrays, maps with string keys (sorted),
// strings, bools, integers, floats, json.RawMessage and json.Marshaler.
// Encoders are built once per type and cached, as encoding/json does.
func Marshal(v any) ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	rv := reflect.ValueOf(v)
	return encoderFor(rv.Type())(make([]byte, 0, 256), rv)
}

type encoder func(dst []byte, v reflect.Value) ([]byte, error)

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	encoders      sync.Map // reflect.Type → encoder
)

func encoderFor(t reflect.Type) encoder {
	if e, ok := encoders.Load(t); ok {
		return e.(encoder)
	}
	// A placeholder breaks cycles in recursive types while the real encoder
	// is built.
	var real encoder
	var wg sync.WaitGroup
	wg.Add(1)
	e, loaded := encoders.LoadOrStore(t, encoder(func(dst []byte, v reflect.Value) ([]byte, error) {
		wg.Wait()
		return real(dst, v)
	}))
	if loaded {
		return e.(encoder)
	}
	real = build(t)
	wg.Done()
	encoders.Store(t, real)
	return real
}

func build(t reflect.Type) encoder {
	if t == rawType {
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			raw := v.Bytes()
			if len(raw) == 0 {
				return append(dst, "null"...), nil
			}
			return append(dst, raw...), nil
		}
	}
	if t.Implements(marshalerType) {
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			if v.Kind() == reflect.Pointer && v.IsNil() {
				return append(dst, "null"...), nil
			}
			b, err := v.Interface().(json.Marshaler).MarshalJSON()
			if err != nil {
				return dst, err
			}
			return append(dst, b...), nil
		}
	}
	switch t.Kind() {
	case reflect.String:
		return func(dst []byte, v reflect.Value) ([]byte, error) { return Quote(dst, v.String()), nil }
	case reflect.Bool:
		return func(dst []byte, v reflect.Value) ([]byte, error) { return strconv.AppendBool(dst, v.Bool()), nil }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(dst []byte, v reflect.Value) ([]byte, error) { return strconv.AppendInt(dst, v.Int(), 10), nil }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(dst []byte, v reflect.Value) ([]byte, error) { return strconv.AppendUint(dst, v.Uint(), 10), nil }
	case reflect.Float32, reflect.Float64:
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			f := v.Float()
			if f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
				return append(dst, "null"...), nil // as JSON.stringify does for NaN and ±Infinity
			}
			return append(dst, FormatJSNumber(f)...), nil
		}
	case reflect.Interface:
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(dst, "null"...), nil
			}
			e := v.Elem()
			return encoderFor(e.Type())(dst, e)
		}
	case reflect.Pointer:
		elem := t.Elem()
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(dst, "null"...), nil
			}
			return encoderFor(elem)(dst, v.Elem())
		}
	case reflect.Slice, reflect.Array:
		elem := t.Elem()
		isSlice := t.Kind() == reflect.Slice
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			if isSlice && v.IsNil() {
				return append(dst, "null"...), nil
			}
			enc := encoderFor(elem)
			dst = append(dst, '[')
			var err error
			for i := 0; i < v.Len(); i++ {
				if i > 0 {
					dst = append(dst, ',')
				}
				if dst, err = enc(dst, v.Index(i)); err != nil {
					return dst, err
				}
			}
			return append(dst, ']'), nil
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return func(dst []byte, _ reflect.Value) ([]byte, error) {
				return dst, fmt.Errorf("rawjson: unsupported map key type %s", t.Key())
			}
		}
		elem := t.Elem()
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(dst, "null"...), nil
			}
			keys := v.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			enc := encoderFor(elem)
			dst = append(dst, '{')
			var err error
			for i, k := range keys {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = Quote(dst, k.String())
				dst = append(dst, ':')
				if dst, err = enc(dst, v.MapIndex(k)); err != nil {
					return dst, err
				}
			}
			return append(dst, '}'), nil
		}
	case reflect.Struct:
		fs := fieldsOf(t)
		return func(dst []byte, v reflect.Value) ([]byte, error) {
			dst = append(dst, '{')
			n := 0
			var err error
			for i := range fs {
				f := &fs[i]
				fv := v.Field(f.index[0])
				for _, k := range f.index[1:] {
					fv = fv.Field(k)
				}
				if f.omitEmpty && isEmpty(fv) {
					continue
				}
				if n > 0 {
					dst = append(dst, ',')
				}
				n++
				dst = append(dst, f.key...)
				if dst, err = encoderFor(f.typ)(dst, fv); err != nil {
					return dst, err
				}
			}
			return append(dst, '}'), nil
		}
	}
	return func(dst []byte, _ reflect.Value) ([]byte, error) {
		return dst, fmt.Errorf("rawjson: unsupported type %s", t)
	}
}

type field struct {
	key       []byte // the quoted name and colon
	index     []int
	typ       reflect.Type
	omitEmpty bool
}

func fieldsOf(t reflect.Type) []field {
	var fs []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			for _, inner := range fieldsOf(sf.Type) {
				inner.index = append([]int{i}, inner.index...)
				fs = append(fs, inner)
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		key := append(Quote(nil, name), ':')
		fs = append(fs, field{key: key, index: []int{i}, typ: sf.Type, omitEmpty: strings.Contains(opts, "omitempty")})
	}
	return fs
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}
