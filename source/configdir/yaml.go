package configdir

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// decodeYAML decodes data's YAML documents with go.yaml.in/yaml/v3, each
// into the value yaml.v3 decodes it to in a fresh interface{}, but for its
// mappings, which are each a *yamlMapping (plain of each is yaml.v3's
// value).
//
// A document is parsed into yaml.v3's node tree and read from it, in the
// order written, which costs less than yaml.v3's own decoding into Go
// values. A document with what that reading leaves to yaml.v3 (aliases,
// merge keys, keys that are not strings or are repeated, tags of its
// own) is decoded by yaml.v3 from its tree, which also reports any error.
// FuzzDecodeYAML holds the two to the same values.
func decodeYAML(data []byte) ([]any, error) {
	return eachDocument(data, func(d *yaml.Decoder) (any, error) {
		var n yaml.Node
		if err := d.Decode(&n); err != nil {
			return nil, err
		}
		if v, ok := nodeValue(&n); ok {
			return v, nil
		}
		var v any
		err := n.Decode(&v)
		return v, err
	})
}

// eachDocument returns the values next returns from a decoder of data,
// one for each document, until it returns io.EOF.
func eachDocument(data []byte, next func(*yaml.Decoder) (any, error)) ([]any, error) {
	var docs []any
	d := yaml.NewDecoder(bytes.NewReader(data))
	for {
		v, err := next(d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, v)
	}
}

// yamlMapping is a mapping of a YAML document: its entries in the order
// they were written, each key once.
type yamlMapping struct {
	Entries []yamlEntry
}

// yamlEntry is an entry of a yamlMapping.
type yamlEntry struct {
	Key   string
	Value any
}

// Get returns the value of key, and whether m has it.
func (m *yamlMapping) Get(key string) (any, bool) {
	for _, e := range m.Entries {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// nodeValue is the value of n, and whether it was read from the tree
// alone: false if n holds what decodeYAML leaves to yaml.v3.
func nodeValue(n *yaml.Node) (any, bool) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, true
		}
		return nodeValue(n.Content[0])
	case yaml.ScalarNode:
		return scalarValue(n)
	case yaml.SequenceNode:
		if n.ShortTag() != "!!seq" {
			return nil, false
		}
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, ok := nodeValue(c)
			if !ok {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	case yaml.MappingNode:
		if n.ShortTag() != "!!map" {
			return nil, false
		}
		m := &yamlMapping{Entries: make([]yamlEntry, 0, len(n.Content)/2)}
		var keys map[string]bool // for a long mapping, its keys so far
		if len(n.Content)/2 > shortMapping {
			keys = make(map[string]bool, len(n.Content)/2)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" || repeated(m, keys, k.Value) {
				return nil, false
			}
			v, ok := nodeValue(n.Content[i+1])
			if !ok {
				return nil, false
			}
			m.Entries = append(m.Entries, yamlEntry{Key: k.Value, Value: v})
		}
		return m, true
	}
	return nil, false // an alias
}

// scalarValue is nodeValue of a scalar: read directly when it is a
// string, a null, a plain decimal integer or true or false; else as yaml.v3
// decodes that scalar alone.
func scalarValue(n *yaml.Node) (any, bool) {
	switch n.ShortTag() {
	case "!!str":
		return n.Value, true
	case "!!null":
		return nil, true
	case "!!bool":
		switch n.Value {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	case "!!int":
		if i, err := strconv.Atoi(n.Value); err == nil && strconv.Itoa(i) == n.Value {
			return i, true
		}
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// shortMapping is the most entries a mapping has for its keys to be
// compared one by one.
const shortMapping = 16

// repeated reports whether m has key, looked up in keys if not nil (and
// added to them).
func repeated(m *yamlMapping, keys map[string]bool, key string) bool {
	if keys != nil {
		if keys[key] {
			return true
		}
		keys[key] = true
		return false
	}
	_, has := m.Get(key)
	return has
}

// plain returns v with every *yamlMapping in it as a map[string]any, as
// yaml.v3 decodes it; v itself if it holds none.
func plain(v any) any {
	if !holdsMapping(v) {
		return v
	}
	switch x := v.(type) {
	case *yamlMapping:
		m := make(map[string]any, len(x.Entries))
		for _, e := range x.Entries {
			m[e.Key] = plain(e.Value)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = plain(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = plain(e)
		}
		return l
	}
	return v
}

// holdsMapping reports whether v is or holds a *yamlMapping.
func holdsMapping(v any) bool {
	switch x := v.(type) {
	case *yamlMapping:
		return true
	case map[string]any:
		for _, e := range x {
			if holdsMapping(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsMapping(e) {
				return true
			}
		}
	}
	return false
}
