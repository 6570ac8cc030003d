// Package authz binds xDS node identities to client certificates: a
// policy, read from YAML, says which certificate identities may claim
// which node ids (and, optionally, node clusters).
//
// A policy is a list of rules:
//
//	allow:
//	- identity: spiffe://example.org/node/node-a
//	  node_ids: [node-a]
//	- identity: spiffe://example.org/ns/*/sa/{id}
//	  node_ids: ["{id}", "{id}-canary"]
//	  node_clusters: [edge]
//
// A certificate's identities are its URI SANs, its DNS SANs and its
// subject's common name (Identities). A node is allowed when some rule's
// identity pattern matches one of them, one of the rule's node_ids matches
// the node's id and, if the rule has node_clusters, one of those matches
// the node's cluster. Anything else is refused.
//
// Identity patterns. A pattern that contains "://" is a URI pattern; any
// other is a name pattern (a DNS name or a common name). A pattern is
// split into segments, by "/" in a URI pattern and by "." or "/" in a name
// pattern. Within a segment, "*" matches one or more characters that are
// not a separator, and "{name}" does the same and captures them as name
// (a letter or "_", then letters, digits or "_"). Two wildcards may not
// touch ("**", "*{id}"), a capture name may appear once, and "{" and "}"
// appear only around capture names. Everything else matches itself,
// case-sensitively.
//
// node_ids and node_clusters entries. An entry "*" matches any value;
// any other entry is a value, in which "{name}" stands for what the
// rule's identity pattern captured as name. A "*" inside a longer entry,
// or a capture name the identity pattern does not capture, is an error.
package authz

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Policy is a parsed authorization policy. It is immutable and safe for
// concurrent use.
type Policy struct {
	rules []rule
}

// rule is one entry of the allow list.
type rule struct {
	identity string         // the pattern as written
	re       *regexp.Regexp // the pattern, anchored, with its captures
	nodeIDs  []template
	clusters []template // empty: any cluster
}

// template is a node_ids or node_clusters entry.
type template struct {
	any   bool     // the entry is "*"
	parts []string // literals at even indexes, capture names at odd ones
}

// expand returns the value t stands for given the captures of m.
func (t template) expand(re *regexp.Regexp, m []string) string {
	var b strings.Builder
	for i, p := range t.parts {
		if i%2 == 0 {
			b.WriteString(p)
		} else {
			b.WriteString(m[re.SubexpIndex(p)])
		}
	}
	return b.String()
}

func (t template) matches(re *regexp.Regexp, m []string, v string) bool {
	return t.any || t.expand(re, m) == v
}

// Rules returns how many rules the policy has.
func (p *Policy) Rules() int { return len(p.rules) }

// Decision is the outcome of Policy.Decide.
type Decision struct {
	// Allowed tells whether the node may be claimed.
	Allowed bool
	// Reason says which identity claimed which node, and, when allowed,
	// by which rule.
	Reason string
}

// Decide tells whether a client whose certificate has identities (see
// Identities; none without a certificate) may claim the node with id
// nodeID in cluster nodeCluster. Rules are tried in order, each against
// each identity in order; the first that allows decides. A refusal names
// the certificate's first identity.
func (p *Policy) Decide(identities []string, nodeID, nodeCluster string) Decision {
	if len(identities) == 0 {
		return Decision{Reason: fmt.Sprintf("no client certificate: node %q may not be claimed", nodeID)}
	}
	clusterDenied := false
	for i, r := range p.rules {
		for _, id := range identities {
			m := r.re.FindStringSubmatch(id)
			if m == nil || !matchesAny(r.nodeIDs, r.re, m, nodeID) {
				continue
			}
			if len(r.clusters) > 0 && !matchesAny(r.clusters, r.re, m, nodeCluster) {
				clusterDenied = true
				continue
			}
			return Decision{Allowed: true,
				Reason: fmt.Sprintf("identity %q may claim node %q (rule %d, %q)", id, nodeID, i, r.identity)}
		}
	}
	if clusterDenied {
		return Decision{Reason: fmt.Sprintf("identity %q may not claim node %q in cluster %q", identities[0], nodeID, nodeCluster)}
	}
	return Decision{Reason: fmt.Sprintf("identity %q may not claim node %q", identities[0], nodeID)}
}

func matchesAny(ts []template, re *regexp.Regexp, m []string, v string) bool {
	for _, t := range ts {
		if t.matches(re, m, v) {
			return true
		}
	}
	return false
}

// Parse parses a policy in YAML. It is strict: an unknown field, a rule
// without identity or node_ids, a malformed pattern or an unknown capture
// name is an error that names the rule (allow[i]) and the field. An empty
// document is an error too; "allow: []" is a policy that allows nothing.
func Parse(data []byte) (*Policy, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("authz policy: empty document: want a mapping with an allow list")
		}
		return nil, fmt.Errorf("authz policy: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errors.New("authz policy: more than one YAML document")
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("authz policy: line %d: want a mapping with an allow list", top.Line)
	}
	p := &Policy{}
	seen := false
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "allow" {
			return nil, fmt.Errorf("authz policy: line %d: unknown field %q (want allow)", k.Line, k.Value)
		}
		if seen {
			return nil, fmt.Errorf("authz policy: line %d: allow given twice", k.Line)
		}
		seen = true
		if v.Kind != yaml.SequenceNode {
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				continue // "allow:" with nothing: no rule
			}
			return nil, fmt.Errorf("authz policy: line %d: allow: want a list of rules", v.Line)
		}
		for j, rn := range v.Content {
			r, err := parseRule(rn)
			if err != nil {
				return nil, fmt.Errorf("authz policy: allow[%d]%w", j, err)
			}
			p.rules = append(p.rules, r)
		}
	}
	if !seen {
		return nil, errors.New("authz policy: no allow list")
	}
	return p, nil
}

// parseRule parses one rule; its errors start with what follows the
// rule's index: ".field: ..." or " (line n): ...".
func parseRule(n *yaml.Node) (rule, error) {
	if n.Kind != yaml.MappingNode {
		return rule{}, fmt.Errorf(" (line %d): want a mapping with identity and node_ids", n.Line)
	}
	var r rule
	var ids, clusters *yaml.Node
	hasIdentity := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var dup bool
		switch k.Value {
		case "identity":
			dup, hasIdentity = hasIdentity, true
			if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
				return rule{}, fmt.Errorf(".identity (line %d): want a string", v.Line)
			}
			r.identity = v.Value
		case "node_ids":
			dup, ids = ids != nil, v
		case "node_clusters":
			dup, clusters = clusters != nil, v
		default:
			return rule{}, fmt.Errorf(".%s (line %d): unknown field (want identity, node_ids, node_clusters)", k.Value, k.Line)
		}
		if dup {
			return rule{}, fmt.Errorf(".%s (line %d): given twice", k.Value, k.Line)
		}
	}
	if r.identity == "" {
		return rule{}, fmt.Errorf(".identity (line %d): required, and not empty", n.Line)
	}
	re, err := compileIdentity(r.identity)
	if err != nil {
		return rule{}, fmt.Errorf(".identity: %q: %w", r.identity, err)
	}
	r.re = re
	if ids == nil {
		return rule{}, fmt.Errorf(".node_ids (line %d): required", n.Line)
	}
	if r.nodeIDs, err = parseTemplates(ids, "node_ids", re); err != nil {
		return rule{}, err
	}
	if len(r.nodeIDs) == 0 {
		return rule{}, fmt.Errorf(".node_ids (line %d): empty: the rule would allow nothing", ids.Line)
	}
	if clusters != nil {
		if r.clusters, err = parseTemplates(clusters, "node_clusters", re); err != nil {
			return rule{}, err
		}
	}
	return r, nil
}

// parseTemplates parses a list of node_ids or node_clusters entries.
func parseTemplates(n *yaml.Node, field string, re *regexp.Regexp) ([]template, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf(".%s (line %d): want a list of strings", field, n.Line)
	}
	var out []template
	for i, e := range n.Content {
		if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
			return nil, fmt.Errorf(".%s[%d] (line %d): want a string", field, i, e.Line)
		}
		t, err := parseTemplate(e.Value, re)
		if err != nil {
			return nil, fmt.Errorf(".%s[%d]: %q: %w", field, i, e.Value, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseTemplate parses one node_ids or node_clusters entry.
func parseTemplate(s string, re *regexp.Regexp) (template, error) {
	if s == "*" {
		return template{any: true}, nil
	}
	if s == "" {
		return template{}, errors.New("empty")
	}
	var t template
	lit := ""
	for rest := s; rest != ""; {
		switch c := rest[0]; c {
		case '*':
			return template{}, errors.New(`"*" matches any value only as the whole entry`)
		case '}':
			return template{}, errors.New(`"}" without "{"`)
		case '{':
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return template{}, errors.New(`"{" without "}"`)
			}
			name := rest[1:end]
			if !validName(name) {
				return template{}, fmt.Errorf("bad capture name %q", name)
			}
			if re.SubexpIndex(name) < 0 {
				return template{}, fmt.Errorf("unknown capture {%s}: the identity pattern does not capture it", name)
			}
			t.parts = append(t.parts, lit, name)
			lit = ""
			rest = rest[end+1:]
		default:
			i := strings.IndexAny(rest, "*{}")
			if i < 0 {
				i = len(rest)
			}
			lit += rest[:i]
			rest = rest[i:]
		}
	}
	t.parts = append(t.parts, lit)
	return t, nil
}

// compileIdentity turns an identity pattern into an anchored regexp.
func compileIdentity(p string) (*regexp.Regexp, error) {
	seg := `[^/]+`
	if !strings.Contains(p, "://") {
		seg = `[^./]+`
	}
	var b strings.Builder
	b.WriteString("^")
	names := map[string]bool{}
	wild := false // the last thing written is a wildcard
	for rest := p; rest != ""; {
		switch c := rest[0]; c {
		case '*':
			if wild {
				return nil, errors.New("two wildcards touch")
			}
			b.WriteString(seg)
			wild = true
			rest = rest[1:]
		case '}':
			return nil, errors.New(`"}" without "{"`)
		case '{':
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return nil, errors.New(`"{" without "}"`)
			}
			name := rest[1:end]
			if !validName(name) {
				return nil, fmt.Errorf("bad capture name %q", name)
			}
			if names[name] {
				return nil, fmt.Errorf("capture {%s} given twice", name)
			}
			if wild {
				return nil, errors.New("two wildcards touch")
			}
			names[name] = true
			b.WriteString("(?P<" + name + ">" + seg + ")")
			wild = true
			rest = rest[end+1:]
		default:
			i := strings.IndexAny(rest, "*{}")
			if i < 0 {
				i = len(rest)
			}
			b.WriteString(regexp.QuoteMeta(rest[:i]))
			wild = false
			rest = rest[i:]
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// validName reports whether s is a capture name: a letter or "_", then
// letters, digits or "_".
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
