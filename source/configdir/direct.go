package configdir

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// decodeDirect sets m from fields (but for an "@type", which names m's
// type), the generic values a file's YAML or JSON decodes to, as protojson
// sets it from their JSON encoding, without
// that encoding: for the values whose outcome is certain to be protojson's
// (an exact field name, a value of the field's own kind, the well-known
// types configurations use most: wrappers, Duration and Any). For anything
// else (another well-known type, a null, bytes, a float, a number where a
// string is due, an unknown name, a field named twice...) it returns false
// and leaves m in any state: the caller then takes the JSON round trip,
// which decodes it or words the error. FuzzDecodeDirect holds the two
// paths to the same message.
func decodeDirect(fields map[string]any, m protoreflect.Message) bool {
	return directMessage(fields, m, true) && proto.CheckInitialized(m.Interface()) == nil
}

// directMessage sets the fields of m, a message of no well-known type,
// from obj; if typed (a resource, or the message of an Any), obj's "@type"
// is skipped.
func directMessage(obj map[string]any, m protoreflect.Message, typed bool) bool {
	fds := m.Descriptor().Fields()
	var seen, oneofs uint64 // field and oneof indexes seen, below 64
	for name, v := range obj {
		if typed && name == "@type" {
			continue
		}
		fd := fds.ByJSONName(name)
		if fd == nil {
			fd = fds.ByTextName(name)
		}
		if fd == nil || fd.Index() >= 64 || v == nil {
			return false
		}
		if seen&(1<<fd.Index()) != 0 {
			return false
		}
		seen |= 1 << fd.Index()
		switch {
		case fd.IsList():
			items, ok := v.([]any)
			if !ok {
				return false
			}
			if len(items) == 0 {
				continue
			}
			list := m.Mutable(fd).List()
			for _, it := range items {
				if fd.Kind() == protoreflect.MessageKind {
					if !directInto(fd.Message(), it, list.AppendMutable().Message()) {
						return false
					}
					continue
				}
				val, ok := directScalar(fd, it)
				if !ok {
					return false
				}
				list.Append(val)
			}
		case fd.IsMap():
			entries, ok := v.(map[string]any)
			if !ok || fd.MapKey().Kind() != protoreflect.StringKind {
				return false
			}
			if len(entries) == 0 {
				continue
			}
			mm := m.Mutable(fd).Map()
			for k, it := range entries {
				if !utf8.ValidString(k) {
					return false
				}
				key := protoreflect.ValueOfString(k).MapKey()
				if vd := fd.MapValue(); vd.Kind() == protoreflect.MessageKind {
					if !directInto(vd.Message(), it, mm.Mutable(key).Message()) {
						return false
					}
					continue
				}
				val, ok := directScalar(fd.MapValue(), it)
				if !ok {
					return false
				}
				mm.Set(key, val)
			}
		default:
			if od := fd.ContainingOneof(); od != nil {
				if od.Index() >= 64 || oneofs&(1<<od.Index()) != 0 {
					return false
				}
				oneofs |= 1 << od.Index()
			}
			if fd.Kind() == protoreflect.MessageKind {
				if !directInto(fd.Message(), v, m.Mutable(fd).Message()) {
					return false
				}
				continue
			}
			val, ok := directScalar(fd, v)
			if !ok {
				return false
			}
			m.Set(fd, val)
		}
	}
	return true
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

// directInto sets m, a new message of md (a singular field's, a list's
// element or a map's value), from v.
func directInto(md protoreflect.MessageDescriptor, v any, m protoreflect.Message) bool {
	switch name := md.FullName(); {
	case wrappers[name]:
		inner := md.Fields().ByNumber(1)
		x, ok := directScalar(inner, v)
		if !ok {
			return false
		}
		m.Set(inner, x)
	case name == durationName:
		s, ok := v.(string)
		if !ok {
			return false
		}
		secs, nanos, ok := parseDuration(s)
		if !ok {
			return false
		}
		m.Set(md.Fields().ByNumber(1), protoreflect.ValueOfInt64(secs))
		m.Set(md.Fields().ByNumber(2), protoreflect.ValueOfInt32(nanos))
	case name == anyName:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		url, ok := obj["@type"].(string)
		if !ok || url == "" {
			return false
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
		if err != nil || mt.Descriptor().FullName().Parent() == "google.protobuf" {
			return false
		}
		inner := mt.New()
		if !directMessage(obj, inner, true) {
			return false
		}
		b, err := proto.MarshalOptions{AllowPartial: true, Deterministic: true}.Marshal(inner.Interface())
		if err != nil {
			return false
		}
		m.Set(md.Fields().ByNumber(1), protoreflect.ValueOfString(url))
		m.Set(md.Fields().ByNumber(2), protoreflect.ValueOfBytes(b))
	case name.Parent() == "google.protobuf":
		return false // Struct, Value, Timestamp, FieldMask...: the round trip's
	default:
		obj, ok := v.(map[string]any)
		if !ok || !directMessage(obj, m, false) {
			return false
		}
	}
	return true
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
