// Package yamlsubset decodes the plain subset of YAML that configuration
// files nearly always use, exactly as go.yaml.in/yaml/v3 decodes it into an
// interface{} value, at a small fraction of its cost.
//
// The subset: block mappings and sequences (a sequence may sit at its
// key's indentation, and an item may open a mapping on the dash's line),
// flow mappings and sequences closed on the line they open, plain scalars
// on one line, single- and double-quoted scalars on one line, comments,
// and documents separated by "---" lines. Anything else (anchors, aliases,
// tags, block scalars, multi-line scalars, complex keys, merge keys,
// directives, tabs, carriage returns, floats, timestamps, integers other
// than plain decimal, keys that are not strings, repeated keys) makes
// Decode report that it did not decode the input, and the caller decodes
// it with yaml.v3, which also reports any error.
package yamlsubset

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Documents decodes data's YAML documents as yaml.v3 decodes each into a
// fresh interface{}: with Decode if data is within the subset, else with
// yaml.v3, whose error it returns.
func Documents(data []byte) ([]any, error) {
	if docs, ok := Decode(data); ok {
		return docs, nil
	}
	return viaYAMLv3(data)
}

// OrderedDocuments is Documents, but for the mappings of data within the
// subset, which are each a *Mapping: Plain of each document is what
// Documents returns.
func OrderedDocuments(data []byte) ([]any, error) {
	if docs, ok := decode(data, true); ok {
		return docs, nil
	}
	return viaYAMLv3(data)
}

// Mapping is a mapping as OrderedDocuments decodes it: its entries in the
// order they were written, each key once. It costs less to build than a
// map, and to go through: the Mappings of a document and their entries
// are allocated together.
type Mapping struct {
	Entries []Entry
}

// Entry is an entry of a Mapping.
type Entry struct {
	Key   string
	Value any
}

// Get returns the value of key, and whether m has it.
func (m *Mapping) Get(key string) (any, bool) {
	for _, e := range m.Entries {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// Plain returns v with every *Mapping in it as a map[string]any, as
// yaml.v3 decodes it; v itself if it holds none.
func Plain(v any) any {
	if !holdsMapping(v) {
		return v
	}
	switch x := v.(type) {
	case *Mapping:
		m := make(map[string]any, len(x.Entries))
		for _, e := range x.Entries {
			m[e.Key] = Plain(e.Value)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = Plain(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = Plain(e)
		}
		return l
	}
	return v
}

// holdsMapping reports whether v is or holds a *Mapping.
func holdsMapping(v any) bool {
	switch x := v.(type) {
	case *Mapping:
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

// viaYAMLv3 decodes data's documents with yaml.v3.
func viaYAMLv3(data []byte) ([]any, error) {
	var docs []any
	d := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var v any
		err := d.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, v)
	}
}

// Decode decodes data's documents, each as yaml.v3 decodes one into a
// fresh interface{} (map[string]any, []any, string, int, bool or nil), and
// reports whether data is within the subset. If it is not, the result is
// nil and data is for yaml.v3 (Documents decodes it either way).
func Decode(data []byte) ([]any, bool) {
	return decode(data, false)
}

// decode is Decode, with Mappings for mappings if ordered.
func decode(data []byte, ordered bool) ([]any, bool) {
	if !printable(data) {
		return nil, false
	}
	var docs []any
	lines := make([]line, 0, bytes.Count(data, nl)+1)
	started := false // a "---" line was seen: every document must have content
	for len(data) > 0 {
		raw := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		indent := 0
		for indent < len(raw) && raw[indent] == ' ' {
			indent++
		}
		text := raw[indent:]
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		if indent == 0 && (bytes.HasPrefix(text, dashes) || bytes.HasPrefix(text, dots) || text[0] == '%') {
			if string(bytes.TrimRight(text, " ")) != "---" || started && len(lines) == 0 {
				return nil, false // an empty document, a document end, a directive, or content after "---"
			}
			if len(lines) > 0 {
				doc, ok := document(lines, ordered)
				if !ok {
					return nil, false
				}
				docs, lines = append(docs, doc), lines[:0]
			}
			started = true
			continue
		}
		lines = append(lines, line{indent: indent, text: text})
	}
	if len(lines) == 0 {
		if started {
			return nil, false // a document with nothing in it
		}
		return docs, true
	}
	doc, ok := document(lines, ordered)
	if !ok {
		return nil, false
	}
	return append(docs, doc), true
}

var (
	nl     = []byte{'\n'}
	dashes = []byte("---")
	dots   = []byte("...")
)

// line is a line with content: its indentation and what follows it.
type line struct {
	indent int
	text   []byte
}

// printable reports whether data holds only what YAML reads as printable
// characters and newlines: no tabs, carriage returns or other control
// characters, no byte order mark, no line breaks other than '\n', and
// valid UTF-8.
func printable(data []byte) bool {
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			if (c < ' ' && c != '\n') || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1,
			r < 0xa0, r == 0x2028, r == 0x2029, r == 0xfeff,
			r >= 0xd800 && r < 0xe000, r == 0xfffe, r == 0xffff:
			return false
		}
		i += size
	}
	return true
}

// document decodes one document's lines, with Mappings if ordered.
func document(lines []line, ordered bool) (any, bool) {
	if lines[0].indent != 0 {
		return nil, false
	}
	p := parser{lines: lines, ordered: ordered}
	v, ok := p.node(0)
	if !ok || p.i != len(lines) {
		return nil, false
	}
	return v, true
}

// parser decodes a document's block structure; the lines are its own (an
// item's line is rewritten to hold what follows the dash).
type parser struct {
	lines   []line
	i       int // the next line
	depth   int // collections open
	ordered bool

	// The entries and items of the collections open, each collection's
	// above those of the collections around it, until it is closed.
	entries []Entry
	items   []any

	// Room for the Mappings to come, and for their entries, allocated in
	// blocks that double up to a bound, from the size of the last.
	mappings            []Mapping
	entryRoom           []Entry
	mappingsN, entriesN int
}

// The sizes of the first and the largest blocks of Mappings and entries.
const (
	firstMappings, mostMappings = 4, 64
	firstEntries, mostEntries   = 16, 256
)

// newMapping returns a Mapping of es, a copy.
func (p *parser) newMapping(es []Entry) *Mapping {
	if len(p.mappings) == 0 {
		p.mappingsN = min(max(2*p.mappingsN, firstMappings), mostMappings)
		p.mappings = make([]Mapping, p.mappingsN)
	}
	m := &p.mappings[0]
	p.mappings = p.mappings[1:]
	if len(es) > len(p.entryRoom) {
		p.entriesN = min(max(2*p.entriesN, firstEntries), mostEntries)
		p.entryRoom = make([]Entry, max(p.entriesN, len(es)))
	}
	n := copy(p.entryRoom, es)
	m.Entries, p.entryRoom = p.entryRoom[:n:n], p.entryRoom[n:]
	return m
}

// closeSequence returns the sequence whose items start at p.items[start].
func (p *parser) closeSequence(start int) []any {
	out := make([]any, len(p.items)-start)
	copy(out, p.items[start:])
	clear(p.items[start:])
	p.items = p.items[:start]
	return out
}

// maxScan is the most entries a mapping is searched for a repeated key
// one by one; a longer one is searched with a map.
const maxScan = 16

// closeMapping returns the mapping whose entries start at
// p.entries[start], unless a key is repeated.
func (p *parser) closeMapping(start int) (any, bool) {
	es := p.entries[start:]
	defer func() {
		clear(es)
		p.entries = p.entries[:start]
	}()
	if !p.ordered {
		m := make(map[string]any, len(es))
		for _, e := range es {
			m[e.Key] = e.Value
		}
		return m, len(m) == len(es)
	}
	if len(es) <= maxScan {
		for i := range es {
			for j := range i {
				if es[i].Key == es[j].Key {
					return nil, false
				}
			}
		}
	} else {
		seen := make(map[string]struct{}, len(es))
		for _, e := range es {
			seen[e.Key] = struct{}{}
		}
		if len(seen) != len(es) {
			return nil, false
		}
	}
	return p.newMapping(es), true
}

// maxDepth bounds the nesting of collections; yaml.v3 has a bound of its
// own, far deeper than any configuration.
const maxDepth = 100

// more reports whether a line is left, and its indentation.
func (p *parser) more() (int, bool) {
	if p.i < len(p.lines) {
		return p.lines[p.i].indent, true
	}
	return 0, false
}

// node decodes the block node that starts on the next line, indented by
// indent.
func (p *parser) node(indent int) (any, bool) {
	text := p.lines[p.i].text
	if p.depth++; p.depth > maxDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	switch {
	case isDash(text):
		return p.sequence(indent)
	case isEntry(text):
		return p.mapping(indent)
	}
	v, ok := p.inline(text, p.depth)
	p.i++
	return v, ok
}

// isDash reports whether text opens a sequence item.
func isDash(text []byte) bool {
	return text[0] == '-' && (len(text) == 1 || text[1] == ' ')
}

// isEntry reports whether text opens a mapping entry: a key and a colon
// followed by a space or the end of the line.
func isEntry(text []byte) bool {
	_, _, ok := splitEntry(text)
	return ok
}

// sequence decodes the block sequence whose dashes are indented by indent.
func (p *parser) sequence(indent int) (any, bool) {
	start := len(p.items)
	for {
		in, ok := p.more()
		if !ok || in != indent || !isDash(p.lines[p.i].text) {
			break
		}
		text := p.lines[p.i].text[1:]
		k := 0
		for k < len(text) && text[k] == ' ' {
			k++
		}
		var item any
		if k == len(text) || text[k] == '#' { // the item is on the lines below, or null
			p.i++
			if next, ok := p.more(); ok && next > indent {
				if item, ok = p.node(next); !ok {
					return nil, false
				}
			}
		} else {
			p.lines[p.i] = line{indent: indent + 1 + k, text: text[k:]}
			if item, ok = p.node(indent + 1 + k); !ok {
				return nil, false
			}
		}
		p.items = append(p.items, item)
	}
	if in, ok := p.more(); ok && in > indent {
		return nil, false // a scalar's continuation, or a misplaced line
	}
	return p.closeSequence(start), true
}

// mapping decodes the block mapping whose keys are indented by indent.
func (p *parser) mapping(indent int) (any, bool) {
	start := len(p.entries)
	for {
		in, ok := p.more()
		if !ok || in != indent {
			break
		}
		key, rest, ok := splitEntry(p.lines[p.i].text)
		if !ok {
			return nil, false
		}
		p.i++
		var v any
		if rest = trimComment(rest); len(rest) > 0 {
			if v, ok = p.inline(rest, p.depth); !ok {
				return nil, false
			}
		} else if next, ok := p.more(); ok && (next > indent || next == indent && isDash(p.lines[p.i].text)) {
			if v, ok = p.node(next); !ok {
				return nil, false
			}
		}
		p.entries = append(p.entries, Entry{key, v})
	}
	if in, ok := p.more(); ok && in > indent {
		return nil, false
	}
	return p.closeMapping(start)
}

// maxKey bounds the bytes of a key and what comes before its colon: YAML
// limits an implicit key to 1024 characters.
const maxKey = 1000

// splitEntry splits a block mapping entry into its key, which must decode
// as a string, and what follows the colon.
func splitEntry(text []byte) (key string, rest []byte, ok bool) {
	if text[0] == '"' || text[0] == '\'' {
		k, end, ok := quoted(text, 0, true)
		if !ok || end >= len(text) || text[end] != ':' || end+1 < len(text) && text[end+1] != ' ' || end > maxKey {
			return "", nil, false
		}
		return k, text[end+1:], true
	}
	if indicator(text[0]) {
		return "", nil, false
	}
	for i := 1; i < len(text); i++ {
		switch {
		case text[i] == '#' && text[i-1] == ' ':
			return "", nil, false // a comment before any colon: not an entry
		case text[i] == ':' && (i+1 == len(text) || text[i+1] == ' '):
			k, ok := plainKey(bytes.TrimRight(text[:i], " "))
			return k, text[i+1:], ok && i <= maxKey
		}
	}
	return "", nil, false
}

// trimComment returns text without its leading spaces and any comment.
func trimComment(text []byte) []byte {
	text = bytes.TrimLeft(text, " ")
	if len(text) > 0 && text[0] == '#' {
		return nil
	}
	return text
}

// startsPlain reports whether a plain scalar may start at text[i]: not at
// an indicator, but for a minus sign before a digit.
func startsPlain(text []byte, i int) bool {
	return !indicator(text[i]) || text[i] == '-' && i+1 < len(text) && isDigit(text[i+1])
}

// indicator reports whether c may not start a plain scalar (a key's, or
// one that startsPlain does not let through).
func indicator(c byte) bool {
	switch c {
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return true
	}
	return false
}

// inline decodes a value that is all of text, but for trailing spaces and
// a comment: a flow collection, a quoted scalar or a plain scalar. depth is
// how many collections are open around it.
func (p *parser) inline(text []byte, depth int) (any, bool) {
	switch c := text[0]; {
	case c == '{' || c == '[' || c == '"' || c == '\'':
		v, end, ok := p.flowNode(text, 0, depth)
		if !ok || len(trimComment(text[end:])) > 0 || end < len(text) && text[end] != ' ' {
			return nil, false
		}
		return v, true
	case !startsPlain(text, 0):
		return nil, false
	}
	end := len(text)
	for i := 1; i < len(text); i++ {
		if text[i] == '#' && text[i-1] == ' ' {
			end = i
			break
		}
		if text[i] == ':' && (i+1 == len(text) || text[i+1] == ' ') {
			return nil, false // "a: b: c", not YAML
		}
	}
	return plain(bytes.TrimRight(text[:end], " "))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// flowNode decodes the flow node at text[i:] (after any spaces), inside
// depth collections, and returns where it ends.
func (p *parser) flowNode(text []byte, i, depth int) (any, int, bool) {
	i = skipSpaces(text, i)
	if i == len(text) || depth >= maxDepth && (text[i] == '{' || text[i] == '[') {
		return nil, 0, false
	}
	switch text[i] {
	case '{':
		return p.flowMapping(text, i+1, depth+1)
	case '[':
		return p.flowSequence(text, i+1, depth+1)
	case '"', '\'':
		s, end, ok := quoted(text, i, false)
		return s, end, ok
	}
	end, ok := flowPlain(text, i)
	if !ok {
		return nil, 0, false
	}
	v, ok := plain(bytes.TrimRight(text[i:end], " "))
	return v, end, ok
}

// flowKey decodes the key at text[i], a flow mapping's (not a collection),
// and returns where it ends.
func flowKey(text []byte, i int) (string, int, bool) {
	if text[i] == '"' || text[i] == '\'' {
		return quoted(text, i, true)
	}
	end, ok := flowPlain(text, i)
	if !ok {
		return "", 0, false
	}
	s, ok := plainKey(bytes.TrimRight(text[i:end], " "))
	return s, end, ok
}

// flowPlain returns where the plain scalar at text[i], inside a flow
// collection, ends, and whether it is within the subset.
func flowPlain(text []byte, i int) (int, bool) {
	if !startsPlain(text, i) {
		return 0, false
	}
	for ; i < len(text); i++ {
		c := text[i]
		if c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == ':' {
			break
		}
		if flowOdd(c) {
			return 0, false
		}
	}
	if i < len(text) && text[i] == ':' {
		if i+1 < len(text) && text[i+1] != ' ' {
			return 0, false // a colon inside a plain scalar, or a key without a space after its colon
		}
	}
	return i, true
}

// flowSequence decodes a flow sequence whose '[' is before text[i].
func (p *parser) flowSequence(text []byte, i, depth int) (any, int, bool) {
	start := len(p.items)
	if j := skipSpaces(text, i); j < len(text) && text[j] == ']' {
		return p.closeSequence(start), j + 1, true
	}
	for {
		v, end, ok := p.flowNode(text, i, depth)
		if !ok {
			return nil, 0, false
		}
		if _, isStr := v.(string); isStr || v == nil {
			if j := skipSpaces(text, end); j < len(text) && text[j] == ':' {
				return nil, 0, false // a single-pair mapping inside a sequence
			}
		}
		p.items = append(p.items, v)
		var done bool
		if i, done, ok = afterEntry(text, end, ']'); !ok || done {
			return p.closeSequence(start), i, ok
		}
	}
}

// afterEntry reads what follows a flow collection's entry that ends at
// text[end]: the collection's closing byte, or a comma before the next
// entry. It returns where the next entry starts, or, with done set, where
// the collection ends.
func afterEntry(text []byte, end int, closing byte) (i int, done, ok bool) {
	i = skipSpaces(text, end)
	switch {
	case i == len(text):
		return 0, false, false
	case text[i] == closing:
		return i + 1, true, true
	case text[i] != ',':
		return 0, false, false
	}
	i++
	if j := skipSpaces(text, i); j < len(text) && (text[j] == closing || text[j] == ',') {
		return 0, false, false // an empty entry, or a trailing comma
	}
	return i, false, true
}

// flowMapping decodes a flow mapping whose '{' is before text[i].
func (p *parser) flowMapping(text []byte, i, depth int) (any, int, bool) {
	start := len(p.entries)
	if j := skipSpaces(text, i); j < len(text) && text[j] == '}' {
		m, _ := p.closeMapping(start)
		return m, j + 1, true
	}
	for {
		i = skipSpaces(text, i)
		if i == len(text) || text[i] == '{' || text[i] == '[' {
			return nil, 0, false
		}
		key, end, ok := flowKey(text, i)
		if !ok || end >= len(text) || text[end] != ':' || end+1 == len(text) || text[end+1] != ' ' || end-i > maxKey {
			return nil, 0, false
		}
		if j := skipSpaces(text, end+1); j < len(text) && (text[j] == ',' || text[j] == '}') {
			return nil, 0, false // an empty value
		}
		v, end, ok := p.flowNode(text, end+1, depth)
		if !ok {
			return nil, 0, false
		}
		p.entries = append(p.entries, Entry{key, v})
		var done bool
		if i, done, ok = afterEntry(text, end, '}'); !ok || done {
			if !ok {
				return nil, 0, false
			}
			m, ok := p.closeMapping(start)
			return m, i, ok
		}
	}
}

// flowOdd reports whether c, inside a plain scalar in a flow collection,
// takes it outside the subset: libyaml reads some of these as indicators
// there, and a comment would leave the collection open.
func flowOdd(c byte) bool {
	switch c {
	case '?', '!', '&', '*', '|', '>', '\'', '"', '%', '@', '`', '#':
		return true
	}
	return false
}

func skipSpaces(text []byte, i int) int {
	for i < len(text) && text[i] == ' ' {
		i++
	}
	return i
}

// quoted decodes the quoted scalar at text[i], a key's if key, and
// returns where it ends. It must close on the line; a double-quoted one may
// hold the escapes \\, \", \/, \n, \t, \r and \uXXXX (not a surrogate).
func quoted(text []byte, i int, key bool) (string, int, bool) {
	q := text[i]
	i++
	var b []byte // the decoded string, once it differs from the text
	start := i
	for i < len(text) {
		c := text[i]
		switch {
		case c == q && q == '\'' && i+1 < len(text) && text[i+1] == '\'':
			b = append(append(b, text[start:i]...), '\'')
			i += 2
			start = i
		case c == q:
			if b == nil {
				return str(text[start:i], key), i + 1, true
			}
			return string(append(b, text[start:i]...)), i + 1, true
		case c == '\\' && q == '"':
			if i+1 == len(text) {
				return "", 0, false
			}
			b = append(b, text[start:i]...)
			var n int
			switch text[i+1] {
			case '\\', '"':
				b, n = append(b, text[i+1]), 2
			case 'n':
				b, n = append(b, '\n'), 2
			case 't':
				b, n = append(b, '\t'), 2
			case 'r':
				b, n = append(b, '\r'), 2
			case 'u':
				if i+6 > len(text) {
					return "", 0, false
				}
				r, err := strconv.ParseUint(string(text[i+2:i+6]), 16, 32)
				if err != nil || r >= 0xd800 && r < 0xe000 {
					return "", 0, false
				}
				b, n = utf8.AppendRune(b, rune(r)), 6
			default:
				return "", 0, false
			}
			i += n
			start = i
		default:
			i++
		}
	}
	return "", 0, false
}

// plainKey decodes a plain scalar that must decode as a string: a key.
func plainKey(text []byte) (string, bool) {
	_, s, isStr, ok := resolve(text, true)
	return s, ok && isStr
}

// plain decodes a plain scalar, resolving it as yaml.v3 does: null, a
// boolean, a decimal int, or a string; anything it would read as another
// kind (a float, a timestamp, an int in another notation, a merge key) is
// outside the subset.
func plain(text []byte) (any, bool) {
	v, s, isStr, ok := resolve(text, false)
	if isStr {
		return s, ok
	}
	return v, ok
}

// resolve is plain's value, a key's if key, as s if it is a string
// (isStr), else as v.
func resolve(text []byte, key bool) (v any, s string, isStr, ok bool) {
	if len(text) == 0 {
		return nil, "", false, false
	}
	switch string(text) {
	case "~", "null", "Null", "NULL":
		return nil, "", false, true
	case "true", "True", "TRUE":
		return true, "", false, true
	case "false", "False", "FALSE":
		return false, "", false, true
	case "<<", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF":
		return nil, "", false, false // a merge key, or a float
	}
	switch c := text[0]; {
	case c == '.':
		s = str(text, key)
		if mayParse(s) {
			if _, err := strconv.ParseFloat(s, 64); err == nil {
				return nil, "", false, false
			}
		}
	case c == '+' || c == '-' || isDigit(c):
		if n, ok := decimal(text); ok {
			return n, "", false, true
		}
		s = str(text, key)
		if numeric(s) {
			return nil, "", false, false
		}
	default:
		s = str(text, key)
	}
	return nil, s, true, true
}

// str is text as a string: if key, the one the same key was decoded to
// before, as far as names holds it.
func str(text []byte, key bool) string {
	if !key {
		return string(text)
	}
	m := names.m.Load()
	if s, ok := (*m)[string(text)]; ok {
		return s
	}
	s := string(text)
	if len(s) <= maxName && len(*m) < maxNames {
		names.add(s)
	}
	return s
}

// names holds keys decoded before, up to maxNames of at most maxName bytes
// each, so that the field names every file repeats cost no allocation. It
// is read without a lock and replaced whole, under mu, to add a key.
var names = func() *nameSet {
	n := &nameSet{}
	n.m.Store(&map[string]string{})
	return n
}()

const (
	maxNames = 1024
	maxName  = 64
)

type nameSet struct {
	mu sync.Mutex
	m  atomic.Pointer[map[string]string]
}

func (n *nameSet) add(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := *n.m.Load()
	if _, ok := old[s]; ok || len(old) >= maxNames {
		return
	}
	m := make(map[string]string, len(old)+1)
	maps.Copy(m, old)
	m[s] = s
	n.m.Store(&m)
}

// decimal decodes text if it is a plain decimal int that fits an int64:
// what yaml.v3 reads as the same int.
func decimal(text []byte) (int, bool) {
	d := text
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 || len(d) > 1 && d[0] == '0' {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if text[0] == '-' {
		n = -n
	}
	return int(n), int64(int(n)) == n // on 32-bit platforms, an int's range
}

// numeric reports whether yaml.v3 might read s, a plain scalar starting
// with a sign or a digit, as anything but a string.
func numeric(s string) bool {
	if strings.IndexByte(s, '_') >= 0 {
		return true
	}
	if len(s) > 4 && isDigit(s[0]) && isDigit(s[1]) && isDigit(s[2]) && isDigit(s[3]) && s[4] == '-' {
		return true // perhaps a timestamp
	}
	if mayParse(s) {
		if _, err := strconv.ParseInt(s, 0, 64); err == nil {
			return true
		}
		if _, err := strconv.ParseUint(s, 0, 64); err == nil {
			return true
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return true
		}
	}
	for _, p := range []string{"0b", "-0b", "0o", "-0o", "+0b", "+0o"} {
		if len(s) > len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}

// mayParse reports whether strconv's ParseInt and ParseUint (of base 0) or
// ParseFloat might accept s: false if s holds a byte none of their
// syntaxes has (they take digits, signs, underscores, one '.', the letters
// of hexadecimal numbers, their prefixes and exponents, and of "Inf",
// "Infinity" and "NaN"), or two dots. It spares the errors they allocate
// for the addresses and durations that configurations are full of.
func mayParse(s string) bool {
	dots := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i] | 0x20; { // ASCII letters as lower case
		case isDigit(s[i]), s[i] == '+', s[i] == '-', s[i] == '_':
		case s[i] == '.':
			if dots++; dots > 1 {
				return false
			}
		case c >= 'a' && c <= 'f', c == 'x', c == 'o', c == 'p', c == 'i', c == 'n', c == 't', c == 'y':
		default:
			return false
		}
	}
	return true
}
