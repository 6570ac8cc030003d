package xdsctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Output formats.
const (
	formatYAML = "yaml"
	formatJSON = "json"
)

func checkFormat(f string) error {
	if f != formatYAML && f != formatJSON {
		return fmt.Errorf("--output: %q is not yaml or json", f)
	}
	return nil
}

// event is one thing that happened to a watched resource, as printed by
// watch and get.
type event struct {
	Event    string // "update" or "does_not_exist"
	Type     string // short name (cds, ...) or the type URL of other types
	TypeURL  string
	Name     string
	Version  string // update only
	TTL      string // update only, when the resource has a TTL
	Resource proto.Message
}

// Event names.
const (
	eventUpdate       = "update"
	eventDoesNotExist = "does_not_exist"
)

// marshalProto renders m as proto3 JSON with Envoy's snake_case field
// names, as configuration files write them.
func marshalProto(m proto.Message) (json.RawMessage, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// field is one key of an ordered JSON object.
type field struct {
	key   string
	value any // string or json.RawMessage
}

// fields returns the event's keys in print order, leaving out empty ones.
func (e event) fields() ([]field, error) {
	fs := []field{{"event", e.Event}, {"type", e.Type}, {"type_url", e.TypeURL}, {"name", e.Name}}
	if e.Version != "" {
		fs = append(fs, field{"version", e.Version})
	}
	if e.TTL != "" {
		fs = append(fs, field{"ttl", e.TTL})
	}
	if e.Resource != nil {
		raw, err := marshalProto(e.Resource)
		if err != nil {
			return nil, fmt.Errorf("encoding %s %q: %w", e.Type, e.Name, err)
		}
		fs = append(fs, field{"resource", raw})
	}
	return fs, nil
}

// printer writes events to w in one format: YAML documents separated by
// "---", or one JSON object per line. It is safe for concurrent use.
type printer struct {
	mu     sync.Mutex // guards the fields below, and writes to w
	w      io.Writer
	format string
	n      int // events printed
}

func (p *printer) print(e event) error {
	fs, err := e.fields()
	if err != nil {
		return err
	}
	var out []byte
	if p.format == formatJSON {
		out, err = orderedJSON(fs)
		out = append(out, '\n')
	} else {
		out, err = orderedYAML(fs)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.format == formatYAML && p.n > 0 {
		out = append([]byte("---\n"), out...)
	}
	p.n++
	_, err = p.w.Write(out)
	return err
}

// orderedJSON encodes fields as one compact JSON object, in order.
func orderedJSON(fs []field) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		buf.Write(k)
		buf.WriteByte(':')
		switch v := f.value.(type) {
		case json.RawMessage:
			buf.Write(v)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			buf.Write(b)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// orderedYAML encodes fields as one YAML mapping, in order; JSON values
// keep their own key order.
func orderedYAML(fs []field) ([]byte, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, f := range fs {
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: f.key}
		var v *yaml.Node
		switch x := f.value.(type) {
		case json.RawMessage:
			n, err := jsonToYAMLNode(x)
			if err != nil {
				return nil, err
			}
			v = n
		default:
			v = &yaml.Node{}
			if err := v.Encode(x); err != nil {
				return nil, err
			}
		}
		m.Content = append(m.Content, k, v)
	}
	return encodeYAML(m)
}

// jsonToYAMLNode parses JSON (which is YAML) into a node that keeps the
// key order, in block style.
func jsonToYAMLNode(b []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	n := &doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	blockStyle(n)
	return n, nil
}

// blockStyle clears the flow style JSON parsing leaves on collections and
// the quoting on plain strings, so output reads as ordinary YAML.
func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0
	}
	if n.Kind == yaml.ScalarNode {
		n.Style = 0 // the encoder quotes what would not read back as a string
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func encodeYAML(n *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
