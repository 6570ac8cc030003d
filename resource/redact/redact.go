// Package redact hides secret material in xDS messages and in text, as
// Envoy's admin does in its config dump: what a field marked with the
// udpa.annotations.sensitive option holds (TLS private keys, their
// passwords, PKCS #12 bundles, session ticket keys, generic secrets, and
// the credentials some filters take inline) is replaced by "[redacted]".
//
// Fields are looked for in every message a message holds, including
// those packed in a google.protobuf.Any (a filter's typed_config) or
// written in a TypedStruct, when their type is in the global registry.
// Within a sensitive field, a DataSource keeps its filename and
// environment_variable, which name where the secret is and are not
// secret, and loses its inline_bytes and inline_string; any other string
// or bytes becomes "[redacted]" and any other scalar is cleared, as in
// Envoy. Certificates and CA bundles are not secret and are kept.
package redact

import (
	"regexp"
	"strings"
	"sync"

	"github.com/cncf/xds/go/udpa/annotations"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Redacted is what secret material is replaced with.
const Redacted = "[redacted]"

// Message returns m with its secret material replaced by Redacted. m is
// not modified: the result is a copy of m when m holds secret material,
// and m itself otherwise, so it must not be modified either.
func Message(m proto.Message) proto.Message {
	if m == nil || !(walker{}).message(m.ProtoReflect(), false) {
		return m
	}
	c := proto.Clone(m)
	walker{apply: true}.message(c.ProtoReflect(), false)
	return c
}

// sensitiveFields caches Sensitive by field.
var sensitiveFields sync.Map // protoreflect.FieldDescriptor → bool

// Sensitive reports whether fd is marked as holding secret material (the
// udpa.annotations.sensitive field option): what it holds, all of it, is
// secret.
func Sensitive(fd protoreflect.FieldDescriptor) bool {
	if v, ok := sensitiveFields.Load(fd); ok {
		return v.(bool)
	}
	opts, _ := fd.Options().(*descriptorpb.FieldOptions)
	s := opts != nil && proto.GetExtension(opts, annotations.E_Sensitive).(bool)
	sensitiveFields.Store(fd, s)
	return s
}

// privateKeyPEM matches a PEM private key block ("-----BEGIN PRIVATE
// KEY-----", "RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY", ...) up to its
// end line, or to the end of the text if it was cut short; its lines may
// be broken by newlines or by escaped ones ("\n").
var privateKeyPEM = regexp.MustCompile(`(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)

// Text returns s with every PEM private key in it replaced by Redacted:
// for text that may quote a configuration, such as an error message or a
// client's NACK, where the fields of secret material cannot be told.
func Text(s string) string {
	if !strings.Contains(s, "PRIVATE KEY-----") {
		return s
	}
	return privateKeyPEM.ReplaceAllLiteralString(s, Redacted)
}

// Full names of the messages the walk treats apart.
const (
	anyName          = "google.protobuf.Any"
	valueName        = "google.protobuf.Value"
	typedStructName  = "xds.type.v3.TypedStruct"
	udpaTypedStruct  = "udpa.type.v1.TypedStruct"
	dataSourceName   = "envoy.config.core.v3.DataSource"
	dataSourceV2Name = "envoy.api.v2.core.DataSource"
)

// walker finds secret material in messages and, with apply, replaces it.
type walker struct{ apply bool }

// message reports whether m holds secret material, all of it being
// secret when sensitive (m is within a sensitive field); with w.apply it
// replaces it in m.
func (w walker) message(m protoreflect.Message, sensitive bool) bool {
	switch m.Descriptor().FullName() {
	case anyName:
		return w.anyMessage(m, sensitive)
	case typedStructName, udpaTypedStruct:
		return w.typedStruct(m, sensitive)
	case dataSourceName, dataSourceV2Name:
		if sensitive {
			return w.dataSource(m)
		}
	case valueName:
		if sensitive {
			return w.value(m)
		}
	}
	var fields []protoreflect.FieldDescriptor // m changes only once Range is done
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	found := false
	for _, fd := range fields {
		found = w.field(m, fd, sensitive || Sensitive(fd)) || found
	}
	return found
}

// field is message for one of m's fields, which is set.
func (w walker) field(m protoreflect.Message, fd protoreflect.FieldDescriptor, sensitive bool) bool {
	v := m.Get(fd)
	switch {
	case fd.IsMap():
		mv := v.Map()
		if fd.MapValue().Message() != nil {
			found := false
			mv.Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
				found = w.message(e.Message(), sensitive) || found
				return true
			})
			return found
		}
		if !sensitive {
			return false
		}
		if w.apply {
			if !textual(fd.MapValue()) {
				m.Clear(fd)
				return true
			}
			var keys []protoreflect.MapKey // the keys are names, not secrets: kept
			mv.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			for _, k := range keys {
				mv.Set(k, redacted(fd.MapValue()))
			}
		}
		return true
	case fd.IsList():
		l := v.List()
		if fd.Message() != nil {
			found := false
			for i := range l.Len() {
				found = w.message(l.Get(i).Message(), sensitive) || found
			}
			return found
		}
		if !sensitive {
			return false
		}
		if w.apply {
			if !textual(fd) {
				m.Clear(fd)
				return true
			}
			for i := range l.Len() {
				l.Set(i, redacted(fd))
			}
		}
		return true
	case fd.Message() != nil:
		return w.message(v.Message(), sensitive)
	case !sensitive:
		return false
	}
	if w.apply {
		if textual(fd) {
			m.Set(fd, redacted(fd))
		} else {
			m.Clear(fd)
		}
	}
	return true
}

// textual reports whether fd is a string or bytes field.
func textual(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind
}

// redacted is Redacted as a value of fd, a string or bytes field.
func redacted(fd protoreflect.FieldDescriptor) protoreflect.Value {
	if fd.Kind() == protoreflect.BytesKind {
		return protoreflect.ValueOfBytes([]byte(Redacted))
	}
	return protoreflect.ValueOfString(Redacted)
}

// dataSource is message for a DataSource within a sensitive field: its
// inline content is secret, not the file or variable it names.
func (w walker) dataSource(m protoreflect.Message) bool {
	fields := m.Descriptor().Fields()
	inlineBytes, inlineString := fields.ByName("inline_bytes"), fields.ByName("inline_string")
	if !m.Has(inlineBytes) && !m.Has(inlineString) {
		return false
	}
	if w.apply {
		m.Set(inlineString, protoreflect.ValueOfString(Redacted)) // one oneof: inline_bytes goes
	}
	return true
}

// value is message for a google.protobuf.Value within a sensitive field:
// a number or a boolean becomes the string Redacted too, for a Value
// must hold something.
func (w walker) value(m protoreflect.Message) bool {
	md := m.Descriptor()
	fd := m.WhichOneof(md.Oneofs().ByName("kind"))
	switch {
	case fd == nil || fd.Name() == "null_value":
		return false
	case fd.Message() != nil: // a Struct or a ListValue
		return w.message(m.Get(fd).Message(), true)
	}
	if w.apply {
		m.Set(md.Fields().ByName("string_value"), protoreflect.ValueOfString(Redacted))
	}
	return true
}

// anyMessage is message for a google.protobuf.Any: the message packed in
// it, unpacked, redacted and packed again. One whose type is not known
// cannot be looked into: within a sensitive field its value is dropped.
func (w walker) anyMessage(m protoreflect.Message, sensitive bool) bool {
	fields := m.Descriptor().Fields()
	typeURL, value := fields.ByName("type_url"), fields.ByName("value")
	inner := unpack(m.Get(typeURL).String(), m.Get(value).Bytes())
	if inner == nil {
		if !sensitive || !m.Has(value) {
			return false
		}
		if w.apply {
			m.Clear(value)
		}
		return true
	}
	if !w.message(inner.ProtoReflect(), sensitive) {
		return false
	}
	if w.apply {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
		if err != nil {
			m.Clear(value)
		} else {
			m.Set(value, protoreflect.ValueOfBytes(b))
		}
	}
	return true
}

// unpack decodes an Any's value as its type; nil if the type is not in
// the global registry or the value does not decode.
func unpack(typeURL string, value []byte) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
	if err != nil {
		return nil
	}
	inner := mt.New().Interface()
	if proto.Unmarshal(value, inner) != nil {
		return nil
	}
	return inner
}

// typedStruct is message for a TypedStruct: its value, a Struct, is read
// as the message its type_url names, redacted and written back. A value
// that does not read as that message is looked at as a Struct (whose
// fields are not marked).
func (w walker) typedStruct(m protoreflect.Message, sensitive bool) bool {
	fields := m.Descriptor().Fields()
	typeURL, value := fields.ByName("type_url"), fields.ByName("value")
	if !m.Has(value) {
		return false
	}
	st := m.Get(value).Message()
	var inner proto.Message
	if mt, err := protoregistry.GlobalTypes.FindMessageByURL(m.Get(typeURL).String()); err == nil {
		if js, err := protojson.Marshal(st.Interface()); err == nil {
			inner = mt.New().Interface()
			if protojson.Unmarshal(js, inner) != nil {
				inner = nil
			}
		}
	}
	if inner == nil {
		return w.message(st, sensitive)
	}
	if !w.message(inner.ProtoReflect(), sensitive) {
		return false
	}
	if w.apply {
		ns := m.NewField(value)
		js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(inner)
		if err == nil {
			err = protojson.Unmarshal(js, ns.Message().Interface())
		}
		if err != nil {
			m.Clear(value)
		} else {
			m.Set(value, ns)
		}
	}
	return true
}
