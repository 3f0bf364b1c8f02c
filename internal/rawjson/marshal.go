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
func Marshal(v any) ([]byte, error) {
	return appendValue(nil, reflect.ValueOf(v))
}

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	rawType       = reflect.TypeFor[json.RawMessage]()
)

func appendValue(dst []byte, v reflect.Value) ([]byte, error) {
	if !v.IsValid() {
		return append(dst, "null"...), nil
	}
	t := v.Type()
	if t == rawType {
		raw := v.Bytes()
		if len(raw) == 0 {
			return append(dst, "null"...), nil
		}
		return append(dst, raw...), nil
	}
	if t.Implements(marshalerType) && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		b, err := v.Interface().(json.Marshaler).MarshalJSON()
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
	switch v.Kind() {
	case reflect.String:
		return Quote(dst, v.String()), nil
	case reflect.Bool:
		return strconv.AppendBool(dst, v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.AppendUint(dst, v.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
			return append(dst, "null"...), nil // as JSON.stringify does for NaN and ±Infinity
		}
		return append(dst, FormatJSNumber(f)...), nil
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		return appendValue(dst, v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		fallthrough
	case reflect.Array:
		dst = append(dst, '[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, v.Index(i)); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case reflect.Map:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		if t.Key().Kind() != reflect.String {
			return dst, fmt.Errorf("rawjson: unsupported map key type %s", t.Key())
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = Quote(dst, k.String())
			dst = append(dst, ':')
			var err error
			if dst, err = appendValue(dst, v.MapIndex(k)); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case reflect.Struct:
		dst = append(dst, '{')
		n := 0
		var err error
		for _, f := range fieldsOf(t) {
			fv := v.FieldByIndex(f.index)
			if f.omitEmpty && isEmpty(fv) {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = Quote(dst, f.name)
			dst = append(dst, ':')
			if dst, err = appendValue(dst, fv); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("rawjson: unsupported type %s", t)
}

type field struct {
	name      string
	index     []int
	omitEmpty bool
}

var fieldCache sync.Map // reflect.Type → []field

func fieldsOf(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field)
	}
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
		fs = append(fs, field{name: name, index: []int{i}, omitEmpty: strings.Contains(opts, "omitempty")})
	}
	fieldCache.Store(t, fs)
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
