package authz

import (
	"strings"
	"testing"
)

const fleet = `
allow:
- identity: spiffe://example.org/node/node-a
  node_ids: [node-a]
- identity: spiffe://example.org/ns/*/sa/{id}
  node_ids: ["{id}", "{id}-canary"]
  node_clusters: [edge]
- identity: "{host}.edge.example.org"
  node_ids: ["{host}"]
- identity: ops
  node_ids: ["*"]
`

func TestDecide(t *testing.T) {
	p, err := Parse([]byte(fleet))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ids             []string
		node, cluster   string
		allowed         bool
		reasonFragments []string
	}{
		{[]string{"spiffe://example.org/node/node-a"}, "node-a", "", true, []string{`identity "spiffe://example.org/node/node-a" may claim node "node-a" (rule 0`}},
		{[]string{"spiffe://example.org/node/node-a"}, "node-b", "", false, []string{`identity "spiffe://example.org/node/node-a" may not claim node "node-b"`}},
		{[]string{"spiffe://example.org/ns/prod/sa/web"}, "web", "edge", true, []string{"rule 1"}},
		{[]string{"spiffe://example.org/ns/prod/sa/web"}, "web-canary", "edge", true, nil},
		{[]string{"spiffe://example.org/ns/prod/sa/web"}, "web", "core", false, []string{`in cluster "core"`}},
		{[]string{"spiffe://example.org/ns/prod/sa/web"}, "db", "edge", false, nil},
		// "*" and captures stay within one path segment.
		{[]string{"spiffe://example.org/ns/a/b/sa/web"}, "web", "edge", false, nil},
		{[]string{"spiffe://example.org/ns/prod/sa/web/x"}, "web/x", "edge", false, nil},
		// In a name pattern they stay within one label.
		{[]string{"host1.edge.example.org"}, "host1", "", true, nil},
		{[]string{"a.host1.edge.example.org"}, "a.host1", "", false, nil},
		{[]string{"ops"}, "anything", "any", true, nil},
		// Any of the identities may match; the refusal names the first.
		{[]string{"spiffe://example.org/other", "host2.edge.example.org", "cn"}, "host2", "", true, []string{`"host2.edge.example.org"`}},
		{[]string{"spiffe://example.org/other", "cn"}, "host2", "", false, []string{`identity "spiffe://example.org/other" may not claim node "host2"`}},
		{nil, "node-a", "", false, []string{"no client certificate"}},
		// Case matters.
		{[]string{"SPIFFE://example.org/node/node-a"}, "node-a", "", false, nil},
	} {
		d := p.Decide(c.ids, c.node, c.cluster)
		if d.Allowed != c.allowed {
			t.Errorf("Decide(%q, %q, %q) = %v (%s), want %v", c.ids, c.node, c.cluster, d.Allowed, d.Reason, c.allowed)
		}
		for _, f := range c.reasonFragments {
			if !strings.Contains(d.Reason, f) {
				t.Errorf("Decide(%q, %q, %q): reason %q lacks %q", c.ids, c.node, c.cluster, d.Reason, f)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty document"},
		{"allow: [", "authz policy"},
		{"deny: []", `unknown field "deny"`},
		{"allow: {}", "want a list of rules"},
		{"{}", "no allow list"},
		{"allow: [x]", "allow[0] (line 1): want a mapping"},
		{"allow:\n- node_ids: [a]", "allow[0].identity (line 2): required"},
		{"allow:\n- identity: ''\n  node_ids: [a]", "allow[0].identity"},
		{"allow:\n- identity: a\n  node_ids: [a]\n- identity: b\n  node_ids: [a]\n  nodes: [x]", "allow[1].nodes (line 6): unknown field"},
		{"allow:\n- identity: a", "allow[0].node_ids (line 2): required"},
		{"allow:\n- identity: a\n  node_ids: []", "allow[0].node_ids (line 3): empty"},
		{"allow:\n- identity: a\n  node_ids: a", "allow[0].node_ids (line 3): want a list"},
		{"allow:\n- identity: a/{id}\n  node_ids: ['{ID}']", `allow[0].node_ids[0]: "{ID}": unknown capture {ID}`},
		{"allow:\n- identity: a/{id}\n  node_ids: [x, 'a-*']", `allow[0].node_ids[1]: "a-*"`},
		{"allow:\n- identity: a/{id}\n  node_ids: [x]\n  node_clusters: ['{c}']", `allow[0].node_clusters[0]: "{c}": unknown capture`},
		{"allow:\n- identity: a/{id\n  node_ids: [x]", `allow[0].identity: "a/{id": "{" without "}"`},
		{"allow:\n- identity: a/id}\n  node_ids: [x]", `"}" without "{"`},
		{"allow:\n- identity: a/**\n  node_ids: [x]", "two wildcards touch"},
		{"allow:\n- identity: a/*{id}\n  node_ids: [x]", "two wildcards touch"},
		{"allow:\n- identity: a/{id}/{id}\n  node_ids: [x]", "capture {id} given twice"},
		{"allow:\n- identity: a/{1d}\n  node_ids: [x]", "bad capture name"},
		{"allow:\n- identity: a\n  identity: b\n  node_ids: [x]", "allow[0].identity (line 3): given twice"},
		{"allow:\n- identity: [a]\n  node_ids: [x]", "allow[0].identity (line 2): want a string"},
		{"allow:\n- identity: a\n  node_ids: [~]", "allow[0].node_ids[0] (line 3): want a string"},
		{"allow: []\n---\nallow: []", "more than one YAML document"},
	} {
		_, err := Parse([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func TestNonASCII(t *testing.T) {
	p, err := Parse([]byte("allow:\n- identity: spiffe://exémple.org/{id}\n  node_ids: ['nœud-{id}-ü']\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Decide([]string{"spiffe://exémple.org/ß"}, "nœud-ß-ü", ""); !d.Allowed {
		t.Fatal(d.Reason)
	}
}

func TestParseEmptyAllowAllowsNothing(t *testing.T) {
	for _, in := range []string{"allow: []", "allow:"} {
		p, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if d := p.Decide([]string{"a"}, "a", ""); d.Allowed {
			t.Errorf("Parse(%q) allows %q", in, d.Reason)
		}
	}
}

// FuzzParsePolicy checks that the parser never panics, and that a policy
// that parses decides the same way each time.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(fleet), "spiffe://example.org/ns/prod/sa/web", "web", "edge")
	f.Add([]byte("allow:\n- identity: '{a}.{b}'\n  node_ids: ['{b}-{a}']"), "x.y", "y-x", "")
	f.Add([]byte("allow: [{identity: '*', node_ids: ['*']}]"), "anything", "n", "c")
	f.Fuzz(func(t *testing.T, data []byte, id, node, cluster string) {
		p, err := Parse(data)
		if err != nil {
			if p != nil {
				t.Fatal("a policy with an error")
			}
			return
		}
		d1 := p.Decide([]string{id}, node, cluster)
		d2 := p.Decide([]string{id}, node, cluster)
		if d1 != d2 {
			t.Fatalf("Decide is not deterministic: %+v, then %+v", d1, d2)
		}
		if d1.Reason == "" {
			t.Fatal("a decision without a reason")
		}
		q, err := Parse(data)
		if err != nil {
			t.Fatalf("a second parse fails: %v", err)
		}
		if d3 := q.Decide([]string{id}, node, cluster); d3 != d1 {
			t.Fatalf("a second parse decides otherwise: %+v, then %+v", d1, d3)
		}
	})
}
