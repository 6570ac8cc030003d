package configdir

import (
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/source/configdir/internal/yamlsubset"
)

// decodeDirect sets m from fields (a map or a *yamlsubset.Mapping, but for
// an "@type", which names m's type), the generic values a file's YAML or
// JSON decodes to, as protojson sets it from their JSON encoding, without
// that encoding: for the values whose outcome is certain to be protojson's
// (an exact field name, a value of the field's own kind, the well-known
// types configurations use most: wrappers, Duration and Any). For anything
// else (another well-known type, a null, bytes, a float, a number where a
// string is due, an unknown name, a field named twice...) it returns false
// and leaves m in any state: the caller then takes the JSON round trip,
// which decodes it or words the error. FuzzDecodeDirect holds the two
// paths to the same message.
//
// The values are written in the protobuf wire format, which proto's own
// decoder then reads into m: each field once, in the order of fields, as
// protojson would set it.
func decodeDirect(fields any, m protoreflect.Message) bool {
	bp := wireBufs.Get().(*[]byte)
	defer wireBufs.Put(bp)
	b, ok := appendMessage((*bp)[:0], fields, m.Descriptor(), true)
	*bp = b
	return ok && unmarshal(b, m) && proto.CheckInitialized(m.Interface()) == nil
}

// wireBufs hold the wire encodings decodeDirect writes (proto's decoder
// copies what it keeps).
var wireBufs = sync.Pool{New: func() any { return new([]byte) }}

// unmarshal reads b into m, which is empty, as far as it is initialized or
// not: decodeDirect checks that, as protojson does, on the whole.
func unmarshal(b []byte, m protoreflect.Message) bool {
	return proto.UnmarshalOptions{AllowPartial: true}.Unmarshal(b, m.Interface()) == nil
}

// appendMessage appends the fields of obj, a message of md (of no
// well-known type); if typed (a resource, or the message of an Any), obj's
// "@type" is skipped.
func appendMessage(b []byte, obj any, md protoreflect.MessageDescriptor, typed bool) ([]byte, bool) {
	w := fieldWriter{fds: md.Fields(), typed: typed}
	ok := true
	switch o := obj.(type) {
	case map[string]any:
		for name, v := range o {
			if b, ok = w.append(b, name, v); !ok {
				return b, false
			}
		}
	case *yamlsubset.Mapping:
		for _, e := range o.Entries {
			if b, ok = w.append(b, e.Key, e.Value); !ok {
				return b, false
			}
		}
	default:
		return b, false
	}
	return b, true
}

// fieldWriter appends the fields of a message, each once.
type fieldWriter struct {
	fds          protoreflect.FieldDescriptors
	typed        bool
	seen, oneofs uint64 // field and oneof indexes seen, below 64
}

// append appends the field named name, of value v.
func (w *fieldWriter) append(b []byte, name string, v any) ([]byte, bool) {
	if w.typed && name == "@type" {
		return b, true
	}
	fd := w.fds.ByJSONName(name)
	if fd == nil {
		fd = w.fds.ByTextName(name)
	}
	if fd == nil || fd.Index() >= 64 || v == nil {
		return b, false
	}
	if w.seen&(1<<fd.Index()) != 0 {
		return b, false
	}
	w.seen |= 1 << fd.Index()
	ok := true
	switch {
	case fd.IsList():
		items, isList := v.([]any)
		if !isList {
			return b, false
		}
		for _, it := range items {
			if b, ok = appendValue(b, fd, it); !ok {
				return b, false
			}
		}
	case fd.IsMap():
		if fd.MapKey().Kind() != protoreflect.StringKind {
			return b, false
		}
		entry := func(k string, it any) bool {
			if !utf8.ValidString(k) {
				return false
			}
			var at int
			b, at = beginLen(b, fd.Number())
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendString(b, k)
			if b, ok = appendValue(b, fd.MapValue(), it); !ok {
				return false
			}
			b = endLen(b, at)
			return true
		}
		switch entries := v.(type) {
		case map[string]any:
			for k, it := range entries {
				if !entry(k, it) {
					return b, false
				}
			}
		case *yamlsubset.Mapping:
			for _, e := range entries.Entries {
				if !entry(e.Key, e.Value) {
					return b, false
				}
			}
		default:
			return b, false
		}
	default:
		if od := fd.ContainingOneof(); od != nil {
			if od.Index() >= 64 || w.oneofs&(1<<od.Index()) != 0 {
				return b, false
			}
			w.oneofs |= 1 << od.Index()
		}
		if b, ok = appendValue(b, fd, v); !ok {
			return b, false
		}
	}
	return b, true
}

// beginLen appends the tag of a length-delimited field num, and room for
// a short length; it returns where the field's contents start, for endLen.
func beginLen(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return append(b, 0), len(b) + 1
}

// endLen puts the length of the contents that start at at before them.
func endLen(b []byte, at int) []byte {
	n := len(b) - at
	size := protowire.SizeVarint(uint64(n))
	if size > 1 {
		b = append(b, make([]byte, size-1)...)
		copy(b[at+size-1:], b[at:at+n])
	}
	protowire.AppendVarint(b[:at-1], uint64(n))
	return b
}

// Well-known types decodeDirect decodes itself.
const (
	durationName = "google.protobuf.Duration"
	anyName      = "google.protobuf.Any"
)

// wrappers are the wrapper types, whose JSON form is their value's.
var wrappers = map[protoreflect.FullName]bool{
	"google.protobuf.BoolValue": true, "google.protobuf.Int32Value": true, "google.protobuf.Int64Value": true,
	"google.protobuf.UInt32Value": true, "google.protobuf.UInt64Value": true, "google.protobuf.StringValue": true,
	"google.protobuf.DoubleValue": true,
}

// appendValue appends v as fd (a singular field, a list's element or a
// map's value, whose number it is written under).
func appendValue(b []byte, fd protoreflect.FieldDescriptor, v any) ([]byte, bool) {
	if fd.Kind() != protoreflect.MessageKind {
		x, ok := directScalar(fd, v)
		if !ok {
			return b, false
		}
		return appendScalar(b, fd.Number(), fd.Kind(), x), true
	}
	b, at := beginLen(b, fd.Number())
	b, ok := appendInto(b, fd.Message(), v)
	return endLen(b, at), ok
}

// appendInto appends the fields of v as a message of md.
func appendInto(b []byte, md protoreflect.MessageDescriptor, v any) ([]byte, bool) {
	if md.ParentFile().Package() != "google.protobuf" {
		return appendMessage(b, v, md, false)
	}
	switch name := md.FullName(); {
	case wrappers[name]:
		inner := md.Fields().ByNumber(1)
		x, ok := directScalar(inner, v)
		if !ok {
			return b, false
		}
		return appendScalar(b, 1, inner.Kind(), x), true
	case name == durationName:
		s, ok := v.(string)
		if !ok {
			return b, false
		}
		secs, nanos, ok := parseDuration(s)
		if !ok {
			return b, false
		}
		b = appendScalar(b, 1, protoreflect.Int64Kind, protoreflect.ValueOfInt64(secs))
		return appendScalar(b, 2, protoreflect.Int32Kind, protoreflect.ValueOfInt32(nanos)), true
	case name == anyName:
		typ, _ := field(v, "@type")
		url, ok := typ.(string)
		if !ok || url == "" {
			return b, false
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
		if err != nil || mt.Descriptor().FullName().Parent() == "google.protobuf" {
			return b, false
		}
		// The contents of an Any are its message's deterministic encoding,
		// as protojson writes them: written as any other message, then
		// read and encoded again.
		at := len(b)
		if b, ok = appendMessage(b, v, mt.Descriptor(), true); !ok {
			return b, false
		}
		inner := mt.New()
		if !unmarshal(b[at:], inner) {
			return b, false
		}
		b = b[:at]
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, url)
		b, at = beginLen(b, 2)
		b, err = proto.MarshalOptions{AllowPartial: true, Deterministic: true}.MarshalAppend(b, inner.Interface())
		return endLen(b, at), err == nil
	case name.Parent() == "google.protobuf":
		return b, false // Struct, Value, Timestamp, FieldMask...: the round trip's
	default:
		return appendMessage(b, v, md, false)
	}
}

// field returns the value of key in v, a mapping (a map or a Mapping).
func field(v any, key string) (any, bool) {
	switch m := v.(type) {
	case map[string]any:
		x, ok := m[key]
		return x, ok
	case *yamlsubset.Mapping:
		return m.Get(key)
	}
	return nil, false
}

// appendScalar appends x, a value of kind, as field num.
func appendScalar(b []byte, num protowire.Number, kind protoreflect.Kind, x protoreflect.Value) []byte {
	switch kind {
	case protoreflect.BoolKind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(x.Bool()))
	case protoreflect.StringKind:
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, x.String())
	case protoreflect.EnumKind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(x.Enum()))
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(x.Int()))
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeZigZag(x.Int()))
	case protoreflect.Sfixed32Kind:
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, uint32(x.Int()))
	case protoreflect.Sfixed64Kind:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, uint64(x.Int()))
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, x.Uint())
	case protoreflect.Fixed32Kind:
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, uint32(x.Uint()))
	case protoreflect.Fixed64Kind:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, x.Uint())
	case protoreflect.DoubleKind:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(x.Float()))
	}
	return b // directScalar takes no other kind
}

// maxExactInt is the largest integer every float64 up to which is exact.
const maxExactInt = 1 << 53

// directScalar is the value of v for fd, a field of a scalar or enum kind.
func directScalar(fd protoreflect.FieldDescriptor, v any) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b, ok := v.(bool)
		return protoreflect.ValueOfBool(b), ok
	case protoreflect.StringKind:
		s, ok := v.(string)
		return protoreflect.ValueOfString(s), ok && utf8.ValidString(s)
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if ed.FullName() == "google.protobuf.NullValue" {
			return protoreflect.Value{}, false
		}
		if s, ok := v.(string); ok {
			ev := ed.Values().ByName(protoreflect.Name(s))
			if ev == nil {
				return protoreflect.Value{}, false
			}
			return protoreflect.ValueOfEnum(ev.Number()), true
		}
		n, ok := integer(v, math.MinInt32, math.MaxInt32)
		if !ok || ed.Values().ByNumber(protoreflect.EnumNumber(n)) == nil {
			return protoreflect.Value{}, false
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, ok := integer(v, math.MinInt32, math.MaxInt32)
		return protoreflect.ValueOfInt32(int32(n)), ok
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, ok := integer(v, math.MinInt64, math.MaxInt64)
		return protoreflect.ValueOfInt64(n), ok
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, ok := integer(v, 0, math.MaxUint32)
		return protoreflect.ValueOfUint32(uint32(n)), ok
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if u, ok := v.(uint64); ok {
			return protoreflect.ValueOfUint64(u), true
		}
		n, ok := integer(v, 0, math.MaxInt64)
		return protoreflect.ValueOfUint64(uint64(n)), ok
	case protoreflect.DoubleKind:
		switch x := v.(type) {
		case float64:
			return protoreflect.ValueOfFloat64(x), !math.IsInf(x, 0) && !math.IsNaN(x)
		case int:
			return protoreflect.ValueOfFloat64(float64(x)), x >= -maxExactInt && x <= maxExactInt
		}
	}
	return protoreflect.Value{}, false // bytes, floats, groups, and other values: the round trip's
}

// integer returns v as an integer within [lo, hi]: a Go int, or a JSON
// number written as a plain decimal integer.
func integer(v any, lo, hi int64) (int64, bool) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case json.Number:
		var err error
		if n, err = strconv.ParseInt(string(x), 10, 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return n, n >= lo && n <= hi
}

// maxDurationSeconds is the range of a Duration's seconds, as protojson
// checks it.
const maxDurationSeconds = 315576000000

// parseDuration reads a Duration in the plainest of its JSON forms, which
// protojson reads alike: an optional "-", an integer without leading
// zeros, an optional fraction of 1 to 9 digits, and "s".
func parseDuration(s string) (secs int64, nanos int32, ok bool) {
	if len(s) < 2 || s[len(s)-1] != 's' {
		return 0, 0, false
	}
	s = s[:len(s)-1]
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	intPart, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			intPart, frac = s[:i], s[i+1:]
			if frac == "" || len(frac) > 9 {
				return 0, 0, false
			}
			break
		}
	}
	if intPart == "" || len(intPart) > 12 || (intPart[0] == '0' && len(intPart) > 1) || !digits(intPart) || !digits(frac) {
		return 0, 0, false
	}
	secs, _ = strconv.ParseInt(intPart, 10, 64)
	if frac != "" {
		f, _ := strconv.ParseInt(frac, 10, 32)
		for range 9 - len(frac) {
			f *= 10
		}
		nanos = int32(f)
	}
	if secs > maxDurationSeconds {
		return 0, 0, false
	}
	if neg {
		secs, nanos = -secs, -nanos
	}
	return secs, nanos, true
}

// digits reports whether s holds ASCII digits only.
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
