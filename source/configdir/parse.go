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
	"maps"
	"regexp"
	"slices"
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
		d, err := readDocument(fmt.Sprintf("%s#%d", name, di+1), m)
		if err != nil {
			probs = append(probs, Problem{File: name, Reason: err.Error()})
			continue
		}
		for _, it := range d.items {
			n++
			r, err := parseEntry(it)
			if err == nil && d.typeURL != "" && r.Type.URL != d.typeURL {
				err = fmt.Errorf("@type %s is not the document's type_url %s", r.Type.URL, d.typeURL)
			}
			if err != nil {
				probs = append(probs, Problem{File: name, Resource: describe(it, n), Reason: err.Error()})
				continue
			}
			out = append(out, entry{res: r, file: name, index: n, sel: d.sel})
		}
	}
	return out, probs
}

// document is what a YAML or JSON document of a file holds.
type document struct {
	items   []any     // the resources, each as parseEntry takes it
	sel     *Selector // the nodes they go to; nil: every node
	typeURL string    // the type every resource must have; "": any
}

// responseFields are the fields of a DiscoveryResponse that a document
// with a resources list may also hold, as Envoy's files for filesystem
// subscriptions and xdsd's own --write-dir files do; "type_url" is checked,
// the others are ignored (versions are the contents' hashes).
var responseFields = map[string]bool{
	"version_info": true, "versionInfo": true, "type_url": true, "typeUrl": true, "nonce": true,
}

// readDocument reads one document, named where for errors: a resources
// list, with a node selector or the fields of a DiscoveryResponse, or a
// single resource.
func readDocument(where string, m map[string]any) (document, error) {
	var d document
	_, hasList := m["resources"]
	isList := hasList
	if _, typed := m["@type"]; !typed {
		for k := range m {
			isList = isList || responseFields[k]
		}
	}
	for _, k := range []string{"static_resources", "staticResources"} {
		if static, ok := m[k]; ok {
			return staticResources(where, k, m, static)
		}
	}
	nodes, hasNodes := m["nodes"]
	if hasNodes && !isList {
		return d, errors.New("\"nodes\" needs a \"resources\" list in the same document")
	}
	if !isList {
		d.items = []any{m}
		return d, nil
	}
	for k, v := range m {
		switch {
		case k == "resources" || k == "nodes":
		case !responseFields[k]:
			return d, fmt.Errorf("a document with \"resources\" may hold only \"nodes\" and a DiscoveryResponse's \"version_info\", \"type_url\" and \"nonce\" besides, not %q", k)
		default:
			if _, ok := v.(string); !ok {
				return d, fmt.Errorf("%q must be a string", k)
			}
		}
	}
	for _, k := range []string{"type_url", "typeUrl"} {
		if u, ok := m[k].(string); ok {
			if resource.Lookup(u) == nil {
				return d, fmt.Errorf("%s %q is not an xDS resource type", k, u)
			}
			d.typeURL = u
		}
	}
	if hasNodes {
		sel, err := parseSelector(where, nodes)
		if err != nil {
			return d, err
		}
		d.sel = sel
	}
	if list, ok := m["resources"]; ok && list != nil {
		if d.items, ok = list.([]any); !ok {
			return d, errors.New("\"resources\" must be a list")
		}
	}
	return d, nil
}

// staticTypes are the type URLs of the lists of a bootstrap's
// static_resources.
var staticTypes = map[string]string{
	"listeners": resource.ListenerType, "clusters": resource.ClusterType, "secrets": resource.SecretType,
}

// staticResources reads a document that holds a bootstrap's
// static_resources, static, under key (its lists' entries are typed by the
// list they are in), and may hold "nodes" besides.
func staticResources(where, key string, m map[string]any, static any) (document, error) {
	var d document
	for k := range m {
		if k != key && k != "nodes" {
			return d, fmt.Errorf("a document with %q may hold only \"nodes\" besides, not %q: a bootstrap's other fields are not read", key, k)
		}
	}
	if nodes, ok := m["nodes"]; ok {
		sel, err := parseSelector(where, nodes)
		if err != nil {
			return d, err
		}
		d.sel = sel
	}
	lists, ok := static.(map[string]any)
	if !ok {
		return d, fmt.Errorf("%q must be a mapping", key)
	}
	for _, k := range slices.Sorted(maps.Keys(lists)) {
		url, known := staticTypes[k]
		if !known {
			return d, fmt.Errorf("static_resources: unknown field %q", k)
		}
		list, ok := lists[k].([]any)
		if !ok && lists[k] != nil {
			return d, fmt.Errorf("static_resources.%s must be a list", k)
		}
		for _, it := range list {
			r, ok := it.(map[string]any)
			if !ok {
				return d, fmt.Errorf("static_resources.%s: an entry must be a mapping", k)
			}
			if t, has := r["@type"]; has && t != url {
				return d, fmt.Errorf("static_resources.%s: @type %v is not %s", k, t, url)
			}
			typed := maps.Clone(r)
			typed["@type"] = url
			d.items = append(d.items, typed)
		}
	}
	return d, nil
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
	var wrapName any // the name an Envoy Resource wrapper gives
	if m["@type"] == resourceWrapper {
		inner := make(map[string]any, len(m))
		for k, v := range m {
			if k != "@type" && k != "name" {
				inner[k] = v
			}
		}
		wrapName, m = m["name"], inner
	}
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
	if err == nil && wrapName != nil && wrapName != r.Name {
		return nil, fmt.Errorf("name: %q is not the resource's name %q", wrapName, r.Name)
	}
	return r, err
}

// resourceWrapper is the type URL of Envoy's wrapper of a resource with a
// TTL (envoy.service.discovery.v3.Resource), which the resources of a
// DiscoveryResponse may be: read as a {ttl, resource} entry, its name, if
// given, the resource's.
const resourceWrapper = "type.googleapis.com/envoy.service.discovery.v3.Resource"

var protoErrPos = regexp.MustCompile(`^proto:\s*(\(line \d+:\d+\):\s*)?`)

// cleanProtoErr drops protojson's prefix and its position in the JSON we
// made from the file, which would mislead.
func cleanProtoErr(err error) string {
	return protoErrPos.ReplaceAllString(strings.ReplaceAll(err.Error(), "\u00a0", " "), "")
}

// describe names an entry that failed to parse, as well as can be told.
func describe(it any, n int) string {
	m, _ := it.(map[string]any)
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
