// Package configdir loads xdsd's configuration directory: Envoy-native
// resources in YAML or JSON files, validated strictly, all or nothing.
//
// A file holds one resource (a document with "@type"); a document with
// "resources:" and a list of them, which may be a DiscoveryResponse as
// Envoy reads one from a file (with "version_info", "type_url" and
// "nonce"); or a bootstrap's "static_resources". YAML files may hold
// several documents. A list entry may be {ttl: 30s, resource: {...}}, or
// Envoy's own wrapper (envoy.service.discovery.v3.Resource), to give the
// resource a TTL. Field names may be snake_case or lowerCamelCase, as
// proto3 JSON allows, and any Envoy or xDS message may appear inside an
// Any.
package configdir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	// Every Envoy and xDS message, so that typed_config and other Any
	// fields of real configurations parse.
	_ "github.com/xdsd/xdsd/internal/envoytypes"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/resource/redact"
	"github.com/xdsd/xdsd/source/configdir/internal/yamlsubset"
)

// Problem is one reason a configuration was rejected.
type Problem struct {
	// File is the path of the file, relative to the directory.
	File string
	// Resource names the resource ("cds \"backend\"", or "resource #2" when
	// its name is unknown); empty for problems with the file as a whole.
	Resource string
	// Reason says what is wrong, naming the field where there is one.
	Reason string
}

// String is the problem as its file, resource and reason: one line.
func (p Problem) String() string {
	s := p.Reason
	if p.Resource != "" {
		s = p.Resource + ": " + s
	}
	if p.File != "" {
		s = p.File + ": " + s
	}
	return s
}

// Error is a rejected configuration: every problem found.
type Error struct {
	// Problems are the problems found, each with its file and resource.
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "configuration rejected: " + strings.Join(lines, "; ")
}

// entry is one resource read from a file.
type entry struct {
	res   *resource.Resource
	file  string
	index int       // position in the file, from 1
	sel   *Selector // nil: every node
}

// ParseFile parses the contents of one configuration file. name is the
// file's path as shown in errors; its extension selects YAML or JSON.
func ParseFile(name string, data []byte) ([]*resource.Resource, error) {
	es, probs := parseFile(name, data)
	if len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	out := make([]*resource.Resource, len(es))
	for i, e := range es {
		out[i] = e.res
	}
	return out, nil
}

// parseFile parses the file name holding data. Its result depends on
// those two alone (the loader reuses it for a file rewritten with the same
// bytes): anything else, another file included, is for assembly.
func parseFile(name string, data []byte) ([]entry, []Problem) {
	docs, err := decodeDocs(name, data)
	if err != nil {
		return nil, []Problem{{File: name, Reason: reason(err)}}
	}
	return parseDocs(name, docs)
}

// parseDocs parses the documents docs of the file name.
func parseDocs(name string, docs []any) ([]entry, []Problem) {
	var out []entry
	var probs []Problem
	n := 0
	for di, doc := range docs {
		m, ok := doc.(map[string]any)
		if o, isMapping := doc.(*yamlsubset.Mapping); isMapping {
			m, ok = make(map[string]any, len(o.Entries)), true
			for _, e := range o.Entries {
				m[e.Key] = e.Value
			}
		}
		if !ok {
			if doc != nil {
				probs = append(probs, Problem{File: name, Reason: "a document must be a mapping with \"@type\", \"resources\" or \"static_resources\""})
			}
			continue
		}
		d, err := readDocument(fmt.Sprintf("%s#%d", name, di+1), m, doc)
		if err != nil {
			probs = append(probs, Problem{File: name, Reason: reason(err)})
			continue
		}
		for _, it := range d.items {
			n++
			r, err := parseEntry(it)
			if err == nil && d.typeURL != "" && r.Type.URL != d.typeURL {
				err = fmt.Errorf("@type %s is not the document's type_url %s", r.Type.URL, d.typeURL)
			}
			if err != nil {
				probs = append(probs, Problem{File: name, Resource: describe(it, n), Reason: reason(err)})
				continue
			}
			out = append(out, entry{res: r, file: name, index: n, sel: d.sel})
		}
	}
	return out, probs
}

// reason is err as a Problem's Reason. The errors of parsing quote no
// secret material (see protoErr), but a decoder's may quote a line: a PEM
// private key in it is hidden too.
func reason(err error) string { return redact.Text(err.Error()) }

// decodeDocs decodes JSON or (multi-document) YAML into generic values,
// where a YAML file's mappings may be *yamlsubset.Mappings (yamlsubset.Plain
// of them is what go.yaml.in/yaml/v3 decodes). A JSON file may start with a
// byte order mark, and one that holds only white space holds nothing, as
// an empty YAML file does.
func decodeDocs(name string, data []byte) ([]any, error) {
	if strings.HasSuffix(name, ".json") {
		data = bytes.TrimPrefix(data, []byte("\ufeff"))
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, nil
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		if _, err := d.Token(); !errors.Is(err, io.EOF) {
			return nil, errors.New("invalid JSON: more after the first value")
		}
		return []any{v}, nil
	}
	docs, err := yamlsubset.OrderedDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %v", err)
	}
	return docs, nil
}

// parseEntry turns one list item into a Resource: a message with "@type",
// or {ttl, resource} or Envoy's Resource wrapper around one.
func parseEntry(it any) (*resource.Resource, error) {
	if o, ok := it.(*yamlsubset.Mapping); ok {
		if msg := directEntry(o); msg != nil {
			return newResource(msg, nil, "")
		}
	}
	m, ok := yamlsubset.Plain(it).(map[string]any)
	if !ok {
		return nil, errors.New("a resource must be a mapping with \"@type\"")
	}
	var opts []resource.Option
	wrapName := "" // the name an Envoy Resource wrapper gives
	_, wrapped := m["resource"]
	if envoy := m["@type"] == resourceWrapper; envoy || wrapped && m["@type"] == nil {
		var ttl time.Duration
		var err error
		if m, wrapName, ttl, err = unwrap(m, envoy); err != nil {
			return nil, err
		}
		if ttl > 0 {
			opts = append(opts, resource.WithTTL(ttl))
		}
	}
	typ, has := m["@type"]
	if !has {
		return nil, errors.New("missing \"@type\"")
	}
	url, _ := typ.(string)
	t := resource.Lookup(url)
	if t == nil {
		return nil, fmt.Errorf("@type %q is not an xDS resource type", typ)
	}
	// The message is read from its fields directly, not as an Any, which
	// protojson would read twice and encode, to be decoded once more: that
	// would be most of the cost of a file.
	msg := t.New()
	if !decodeDirect(m, msg.ProtoReflect()) {
		fields := make(map[string]any, len(m)-1)
		for k, v := range m {
			if k != "@type" {
				fields[k] = v
			}
		}
		msg = t.New()
		js, err := json.Marshal(fields)
		if err != nil {
			return nil, err
		}
		if err := protojson.Unmarshal(js, msg); err != nil {
			return nil, errors.New(protoErr(msg.ProtoReflect().Descriptor(), fields, js, err))
		}
	}
	return newResource(msg, opts, wrapName)
}

// directEntry is the message of o, a resource as a Mapping, if it is
// neither wrapped nor wrapper, and decodeDirect takes it; else nil.
func directEntry(o *yamlsubset.Mapping) proto.Message {
	if _, wrapped := o.Get("resource"); wrapped {
		return nil
	}
	typ, _ := o.Get("@type")
	url, _ := typ.(string)
	t := resource.Lookup(url)
	if url == resourceWrapper || t == nil {
		return nil
	}
	msg := t.New()
	if !decodeDirect(o, msg.ProtoReflect()) {
		return nil
	}
	return msg
}

// newResource is the Resource of msg, with opts; wrapName, if not empty,
// is the name a wrapper gave it.
func newResource(msg proto.Message, opts []resource.Option, wrapName string) (*resource.Resource, error) {
	r, err := resource.New(msg, opts...)
	if u := errors.Unwrap(err); u != nil {
		err = u // the problem names the resource already
	}
	if err == nil && wrapName != "" && wrapName != r.Name {
		return nil, fmt.Errorf("name: %q is not the resource's name %q", wrapName, r.Name)
	}
	return r, err
}

// describe names an entry that failed to parse, as well as can be told.
func describe(it any, n int) string {
	m, _ := yamlsubset.Plain(it).(map[string]any)
	if inner, ok := m["resource"].(map[string]any); ok && (m["@type"] == nil || m["@type"] == resourceWrapper) {
		m = inner
	}
	typ, _ := m["@type"].(string)
	kind := "resource"
	if t := resource.Lookup(typ); t != nil {
		kind = t.Short
	}
	for _, k := range []string{"name", "cluster_name", "clusterName"} {
		if s, ok := m[k].(string); ok && s != "" {
			return fmt.Sprintf("%s %q", kind, s)
		}
	}
	return fmt.Sprintf("%s #%d", kind, n)
}
