package configdir

import (
	"bytes"
	"encoding/json"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/resource/redact"
)

// sensitiveAt reports whether path, a field's path in doc (a resource of
// type md as proto3 JSON, see jsonPath), leads into a field marked as
// holding secret material (redact.Sensitive), through messages, lists,
// maps and the messages Anys and TypedStructs hold. A path it cannot
// follow (a field or type it does not know) is not secret: protojson's
// error is then about that, not about a value.
func sensitiveAt(md protoreflect.MessageDescriptor, doc any, path []any) bool {
	for i := 0; i < len(path); i++ {
		obj, _ := doc.(map[string]any)
		key, ok := path[i].(string)
		if !ok || obj == nil {
			return false
		}
		switch md.FullName() {
		case "google.protobuf.Any":
			if md = resolve(obj["@type"]); md == nil {
				return false
			}
			if wellKnown(md) { // {"@type": ..., "value": ...}
				return false
			}
		case "xds.type.v3.TypedStruct", "udpa.type.v1.TypedStruct":
			if key != "value" {
				return false
			}
			if md = resolve(obj["type_url"]); md == nil {
				return false
			}
			doc = obj["value"]
			continue
		}
		fd := md.Fields().ByJSONName(key)
		if fd == nil {
			fd = md.Fields().ByTextName(key)
		}
		if fd == nil {
			return false
		}
		if redact.Sensitive(fd) {
			return true
		}
		doc = obj[key]
		switch {
		case fd.IsList():
			j, ok := next(path, &i).(int)
			arr, _ := doc.([]any)
			if !ok || j >= len(arr) {
				return false
			}
			doc = arr[j]
		case fd.IsMap():
			k, ok := next(path, &i).(string)
			m, _ := doc.(map[string]any)
			if !ok || m == nil {
				return false
			}
			doc, fd = m[k], fd.MapValue()
		}
		if md = fd.Message(); md == nil {
			return false
		}
	}
	return false
}

// next returns the step after path[*i] and moves *i to it; nil at the end.
func next(path []any, i *int) any {
	if *i+1 >= len(path) {
		return nil
	}
	*i++
	return path[*i]
}

// resolve returns the message type a type URL names, or nil.
func resolve(url any) protoreflect.MessageDescriptor {
	s, _ := url.(string)
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(s)
	if err != nil {
		return nil
	}
	return mt.Descriptor()
}

// wellKnown reports whether md is a google.protobuf type, which proto3
// JSON writes in an Any as its "value"; none holds a marked field.
func wellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

// hideToken replaces in msg, a protojson error, the token of js at byte
// offset off, which it quotes, with "[redacted]".
func hideToken(msg string, js []byte, off int) string {
	if off >= len(js) {
		return msg
	}
	dec := json.NewDecoder(bytes.NewReader(js[off:]))
	if _, err := dec.Token(); err != nil {
		return msg
	}
	tok := strings.TrimSpace(string(js[off : off+int(dec.InputOffset())]))
	if tok == "" || len(tok) == 1 && strings.ContainsAny(tok, "{}[]") {
		return msg // a delimiter: nothing of the value is quoted
	}
	return strings.ReplaceAll(msg, tok, redact.Redacted)
}
