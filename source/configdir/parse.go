// Package configdir loads xdsd's configuration directory: Envoy-native
// resources in YAML or JSON files, validated strictly, all or nothing.
//
// A file holds one resource (a document with "@type"), or a document with
// "resources:" and a list of them; YAML files may hold several documents.
// A list entry may be {ttl: 30s, resource: {...}} to give the resource a
// TTL. Field names may be snake_case or lowerCamelCase, as proto3 JSON
// allows, and any Envoy or xDS message may appear inside an Any.
package configdir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"

	// Every Envoy and xDS message, so that typed_config and other Any
	// fields of real configurations parse.
	_ "github.com/xdsd/xdsd/internal/envoytypes"
	"github.com/xdsd/xdsd/resource"
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
	if p.Resource == "" {
		return p.File + ": " + p.Reason
	}
	return p.File + ": " + p.Resource + ": " + p.Reason
}

// Error is a rejected configuration: every problem found.
type Error struct {
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

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
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
		return nil, []Problem{{File: name, Reason: err.Error()}}
	}
	var out []entry
	var probs []Problem
	n := 0
	for di, doc := range docs {
		m, ok := doc.(map[string]any)
		if !ok {
			if doc != nil {
				probs = append(probs, Problem{File: name, Reason: "a document must be a mapping with \"@type\" or \"resources\""})
			}
			continue
		}
		var sel *Selector
		if nodes, has := m["nodes"]; has {
			if _, hasList := m["resources"]; !hasList {
				probs = append(probs, Problem{File: name, Reason: "\"nodes\" needs a \"resources\" list in the same document"})
				continue
			}
			if sel, err = parseSelector(fmt.Sprintf("%s#%d", name, di+1), nodes); err != nil {
				probs = append(probs, Problem{File: name, Reason: err.Error()})
				continue
			}
		}
		var items []any
		if list, has := m["resources"]; has {
			if want := 1 + btoi(sel != nil); len(m) != want {
				probs = append(probs, Problem{File: name, Reason: "a document with \"resources\" may hold only \"nodes\" besides"})
				continue
			}
			if items, ok = list.([]any); !ok {
				probs = append(probs, Problem{File: name, Reason: "\"resources\" must be a list"})
				continue
			}
		} else {
			items = []any{m}
		}
		for _, it := range items {
			n++
			r, err := parseEntry(it)
			if err != nil {
				probs = append(probs, Problem{File: name, Resource: describe(it, n), Reason: err.Error()})
				continue
			}
			out = append(out, entry{res: r, file: name, index: n, sel: sel})
		}
	}
	return out, probs
}

// decodeDocs decodes JSON or (multi-document) YAML into generic values.
func decodeDocs(name string, data []byte) ([]any, error) {
	if strings.HasSuffix(name, ".json") {
		var v any
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		return []any{v}, nil
	}
	var docs []any
	d := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var v any
		err := d.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("invalid YAML: %v", err)
		}
		docs = append(docs, v)
	}
}

// parseEntry turns one list item into a Resource: a message with "@type",
// or {ttl, resource} around one.
func parseEntry(it any) (*resource.Resource, error) {
	m, ok := it.(map[string]any)
	if !ok {
		return nil, errors.New("a resource must be a mapping with \"@type\"")
	}
	var opts []resource.Option
	if inner, wrapped := m["resource"]; wrapped && m["@type"] == nil {
		for k := range m {
			if k != "resource" && k != "ttl" {
				return nil, fmt.Errorf("unknown field %q in a {ttl, resource} entry", k)
			}
		}
		if ttl, has := m["ttl"]; has {
			s, _ := ttl.(string)
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 || !strings.HasSuffix(s, "s") {
				return nil, fmt.Errorf("ttl: %q is not a positive proto3 JSON duration such as \"30s\"", ttl)
			}
			opts = append(opts, resource.WithTTL(d))
		}
		if m, ok = inner.(map[string]any); !ok {
			return nil, errors.New("resource: must be a mapping with \"@type\"")
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
	// was most of the cost of a file.
	fields := make(map[string]any, len(m)-1)
	for k, v := range m {
		if k != "@type" {
			fields[k] = v
		}
	}
	js, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	msg := t.New()
	if err := protojson.Unmarshal(js, msg); err != nil {
		return nil, errors.New(cleanProtoErr(err))
	}
	r, err := resource.New(msg, opts...)
	if u := errors.Unwrap(err); u != nil {
		err = u // the problem names the resource already
	}
	return r, err
}

var protoErrPos = regexp.MustCompile(`^proto:\s*(\(line \d+:\d+\):\s*)?`)

// cleanProtoErr drops protojson's prefix and its position in the JSON we
// made from the file, which would mislead.
func cleanProtoErr(err error) string {
	return protoErrPos.ReplaceAllString(strings.ReplaceAll(err.Error(), "\u00a0", " "), "")
}

// describe names an entry that failed to parse, as well as can be told.
func describe(it any, n int) string {
	m, _ := it.(map[string]any)
	if inner, ok := m["resource"].(map[string]any); ok && m["@type"] == nil {
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
