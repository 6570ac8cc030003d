package fileout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	// Every Envoy and xDS message, so that the Any fields nested in
	// resources (typed_config, ...) can be written and read as JSON, YAML
	// and text.
	_ "github.com/xdsd/xdsd/internal/envoytypes"
)

// Encoding is the format of the files a Writer writes.
type Encoding string

// The encodings Envoy's filesystem subscriptions read. Envoy chooses the
// parser from the file's extension (see Ext).
const (
	// YAML is proto3 JSON written as block YAML, with "@type" keys.
	YAML Encoding = "yaml"
	// JSON is canonical proto3 JSON (protojson), indented.
	JSON Encoding = "json"
	// Binary is the proto wire format, encoded deterministically.
	Binary Encoding = "binary"
	// Text is the protobuf text format (prototext), with expanded Any.
	Text Encoding = "text"
)

// Encodings lists every encoding, for flag help.
var Encodings = []Encoding{YAML, JSON, Binary, Text}

// ParseEncoding parses an encoding name: "yaml" (or "yml"), "json",
// "binary" (or "pb", "proto") or "text" (or "pb_text", "prototext"),
// ignoring case.
func ParseEncoding(s string) (Encoding, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yaml", "yml":
		return YAML, nil
	case "json":
		return JSON, nil
	case "binary", "pb", "proto":
		return Binary, nil
	case "text", "pb_text", "prototext":
		return Text, nil
	}
	return "", fmt.Errorf("unknown file encoding %q (want yaml, json, binary or text)", s)
}

// Ext returns the file extension, with its dot, under which Envoy's
// MessageUtil::loadFromFile parses the encoding: ".yaml", ".json", ".pb"
// or ".pb_text".
func (e Encoding) Ext() string {
	switch e {
	case YAML:
		return ".yaml"
	case JSON:
		return ".json"
	case Binary:
		return ".pb"
	case Text:
		return ".pb_text"
	}
	return ""
}

// EncodingOf returns the encoding a file's extension implies: .yaml and
// .yml, .json, .pb, and .pb_text or .txt.
func EncodingOf(path string) (Encoding, bool) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return YAML, true
	case ".json":
		return JSON, true
	case ".pb":
		return Binary, true
	case ".pb_text", ".txt":
		return Text, true
	}
	return "", false
}

// Marshal encodes a response. The output is the same for the same
// response within one build of the program (protojson and prototext
// deliberately vary their spacing between builds; JSON and YAML are
// normalised here, text is not).
func (e Encoding) Marshal(resp *discovery.DiscoveryResponse) ([]byte, error) {
	switch e {
	case Binary:
		return proto.MarshalOptions{Deterministic: true}.Marshal(resp)
	case Text:
		b, err := prototext.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(resp)
		if err != nil {
			return nil, err
		}
		return append(bytes.TrimRight(b, "\n"), '\n'), nil
	case JSON, YAML:
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
		if err != nil {
			return nil, err
		}
		if e == YAML {
			return jsonToYAML(b)
		}
		var out bytes.Buffer
		// Indent drops protojson's random extra spaces.
		if err := json.Indent(&out, b, "", "  "); err != nil {
			return nil, err
		}
		out.WriteByte('\n')
		return out.Bytes(), nil
	}
	return nil, fmt.Errorf("unknown file encoding %q", string(e))
}

// Unmarshal decodes a response. In JSON, YAML and text, unknown fields are
// an error, as they are for Envoy; the binary encoding keeps them, as
// protobuf decoding does.
func (e Encoding) Unmarshal(data []byte) (*discovery.DiscoveryResponse, error) {
	resp := new(discovery.DiscoveryResponse)
	var err error
	switch e {
	case Binary:
		err = proto.Unmarshal(data, resp)
	case Text:
		err = prototext.Unmarshal(data, resp)
	case JSON:
		err = protojson.Unmarshal(data, resp)
	case YAML:
		var j []byte
		if j, err = yamlToJSON(data); err == nil {
			err = protojson.Unmarshal(j, resp)
		}
	default:
		err = fmt.Errorf("unknown file encoding %q", string(e))
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// jsonToYAML rewrites protojson output as block YAML, keeping the field
// order. Strings stay plain only when every YAML 1.1 and 1.2 reader
// (Envoy's yaml-cpp reads "on" or "yes" unquoted as a bool) takes them as
// strings; the rest are double-quoted.
func jsonToYAML(j []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(j, &doc); err != nil {
		return nil, fmt.Errorf("json to yaml: %w", err)
	}
	restyle(&doc)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("json to yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("json to yaml: %w", err)
	}
	return out.Bytes(), nil
}

// safePlain matches strings that read back as the same string when
// written as a plain scalar, unless they are one of the reserved words.
var safePlain = regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9_./-]*$`)

// reserved are words some YAML reader resolves to a bool, null or number.
var reserved = map[string]bool{
	"y": true, "n": true, "yes": true, "no": true, "true": true, "false": true,
	"on": true, "off": true, "null": true, "nan": true, "inf": true, "infinity": true,
}

// restyle turns the flow style of parsed JSON into block style, and
// chooses plain or double-quoted style for each string.
func restyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" &&
		(!safePlain.MatchString(n.Value) || reserved[strings.ToLower(n.Value)]) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		restyle(c)
	}
}

// yamlToJSON converts one YAML document to JSON, with the meaning a YAML
// 1.2 reader gives it: quoted and other !!str scalars are strings.
func yamlToJSON(y []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(y, &doc); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if doc.Kind == 0 {
		return nil, fmt.Errorf("invalid YAML: empty document")
	}
	c := yamlConverter{budget: aliasExpansion*countNodes(&doc) + aliasSlack}
	v, err := c.value(&doc)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// A document's aliases may make its value at most aliasExpansion times as
// many nodes as it has, plus aliasSlack: enough for anchors reused as
// YAML files use them, and a bound on a "billion laughs" document, whose
// few nodes stand for exponentially many.
const (
	aliasExpansion = 16
	aliasSlack     = 1 << 10
)

// countNodes returns the number of nodes in n's tree, not following
// aliases.
func countNodes(n *yaml.Node) int {
	count := 1
	for _, c := range n.Content {
		count += countNodes(c)
	}
	return count
}

// yamlConverter turns a yaml.Node tree into the values json.Marshal
// takes, following aliases. yaml.v3 checks aliases only when it decodes
// into Go values itself, so the converter refuses an alias to a node that
// contains it (which would never end) and stops once its values would
// exceed budget nodes.
type yamlConverter struct {
	budget    int
	expanding map[*yaml.Node]bool // the anchored nodes being expanded, through aliases
}

func (c *yamlConverter) value(n *yaml.Node) (any, error) {
	if c.budget--; c.budget < 0 {
		return nil, fmt.Errorf("line %d: document contains excessive aliasing", n.Line)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0])
	case yaml.AliasNode:
		if c.expanding[n.Alias] {
			return nil, fmt.Errorf("line %d: alias *%s refers to a node that contains it", n.Line, n.Value)
		}
		if c.expanding == nil {
			c.expanding = make(map[*yaml.Node]bool)
		}
		c.expanding[n.Alias] = true
		defer delete(c.expanding, n.Alias)
		return c.value(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			v, err := c.value(item)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: mapping key is not a scalar", k.Line)
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			v, err := c.value(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			if f, ok := v.(float64); ok {
				// proto3 JSON spells the non-finite values as strings.
				switch {
				case math.IsNaN(f):
					return "NaN", nil
				case math.IsInf(f, 1):
					return "Infinity", nil
				case math.IsInf(f, -1):
					return "-Infinity", nil
				}
			}
			return v, nil
		default:
			return n.Value, nil
		}
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}
