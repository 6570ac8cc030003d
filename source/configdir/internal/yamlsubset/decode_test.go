package yamlsubset

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// agrees fails t unless Decode, if it decodes data, decodes it as yaml.v3
// does, and as the ordered decoding does but for its Mappings, and reports
// whether Decode decoded it.
func agrees(t *testing.T, data []byte) bool {
	t.Helper()
	got, ok := Decode(data)
	ordered, orderedOK := decode(data, true)
	if orderedOK != ok {
		t.Fatalf("Decode(%q) reports %v, the ordered decoding %v", data, ok, orderedOK)
	}
	if !ok {
		return false
	}
	if plain := Plain(ordered); !reflect.DeepEqual(plain, any(got)) {
		t.Fatalf("Decode(%q) = %#v, the ordered decoding: %#v", data, got, plain)
	}
	want, err := viaYAMLv3(data)
	if err != nil {
		t.Fatalf("Decode(%q) = %#v, but yaml.v3 rejects it: %v", data, got, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q) = %#v, yaml.v3: %#v", data, got, want)
	}
	return true
}

// Inputs within the subset: what configuration files hold.
var within = []string{
	"",
	"# only a comment\n\n",
	"a: 1\n",
	"a: 1",
	"---\na: b\n",
	"a: b\n---\nc: d\n---\n- e\n",
	"resources:\n- \"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\n  cluster_name: c-1\n  endpoints:\n  - locality: {region: bench, zone: bench-a}\n    load_balancing_weight: 1\n    lb_endpoints:\n    - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 8080}}}\n      load_balancing_weight: 2\n    - endpoint: {address: {socket_address: {address: 10.0.0.2, port_value: 8080}}}\n",
	"resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n  type: EDS\n  connect_timeout: 1s\n  eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}\n",
	"a:\n  b:\n    c: [1, -2, x y, 'q''s', \"d\\\"q\\u00e9\"]\n  e: []\n  f: {}\n",
	"a:\n- 1\n- 2\nb: 3\n",
	"- a: 1\n  b: 2\n-   c: 3\n    d:\n    - 4\n- - 5\n  - 6\n-\n  e: 7\n- # comment\n  f\n",
	"key with spaces: value with spaces   # a comment\nurl: http://example.com/a#b\nhash: a#b\n",
	"a: ~\nb: null\nc: true\nd: False\ne:\nf: yes\ng: on\nh: 0\ni: -0\nj: 123456789012345678\n",
	"a: 10.0.0.1\nb: 1s\nc: 0.5s\nd: 1-2\ne: v3\nf: \"1\"\ng: '2.5'\n",
	"a: b:c\n",
	"\"quoted key\": 1\n'single': 2\n",
	"a:\n  b\n",
	"scalar\n",
	"[a, b]\n",
	"é: ü\n",
}

// Inputs outside the subset, valid YAML or not: yaml.v3 decides.
var outside = []string{
	"a: 1.5\n", "a: 1e3\n", "a: .inf\n", "a: 0x1f\n", "a: 0o17\n", "a: 017\n", "a: 1_000\n",
	"a: 2001-12-14\n", "a: +1\n", "a: 1234567890123456789\n",
	"a: &x 1\nb: *x\n", "a: !!str 1\n", "a: |\n  text\n", "a: >\n  text\n",
	"a: b\n  c\n", "- a\n  b\n", "a: 'multi\n  line'\n", "a: [1,\n  2]\n",
	"a:\tb\n", "a: b\r\n", "\ufeffa: b\n", "%YAML 1.2\n---\na: b\n",
	"a: b\n---\n", "---\n---\na: b\n", "a: b\n...\n",
	"a: 1\na: 2\n", "1: a\n", "true: a\n", "null: a\n", "<<: {a: 1}\n",
	"? a\n: b\n", "a: b: c\n", "a: [b,]\n", "a: {b: }\n", "a: {b}\n", "a: [b: c]\n",
	"a: {b: http://x}\n", "d: :e\n", "a: \"\\x41\"\n", "  a: b\n", "a: b\n c: d\n",
	"a: 1\n- b\n", "- a\nb: 1\n", "a: 'x' y\n", "a: \"x\"#y\n",
}

func TestWithinDecodesAsYAMLv3(t *testing.T) {
	for _, in := range within {
		if !agrees(t, []byte(in)) {
			t.Errorf("Decode(%q) left it to yaml.v3; it is within the subset", in)
		}
	}
}

func TestOutsideIsLeftToYAMLv3(t *testing.T) {
	for _, in := range outside {
		if agrees(t, []byte(in)) {
			t.Errorf("Decode(%q) decoded it; it is outside the subset", in)
		}
	}
}

func TestDeepIsLeftToYAMLv3(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("- ", maxDepth+1) + "a\n",
		"a: " + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + "\n",
	} {
		if _, ok := Decode([]byte(in)); ok {
			t.Errorf("Decode decoded %d bytes nested past maxDepth", len(in))
		}
	}
	in := strings.Repeat("- ", maxDepth-1) + "a\n"
	if !agrees(t, []byte(in)) {
		t.Errorf("Decode left %d bytes nested within maxDepth to yaml.v3", len(in))
	}
}

// FuzzDecode checks Decode against yaml.v3 on whatever it decodes.
func FuzzDecode(f *testing.F) {
	for _, in := range within {
		f.Add([]byte(in))
	}
	for _, in := range outside {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		agrees(t, data)
	})
}

// endpointFile is an endpoint set as an operator writes one per file.
var endpointFile = []byte(within[6])

func BenchmarkDecode(b *testing.B) {
	for b.Loop() {
		if _, ok := Decode(endpointFile); !ok {
			b.Fatal("not decoded")
		}
	}
}

func BenchmarkYAMLv3(b *testing.B) {
	for b.Loop() {
		if _, err := viaYAMLv3(endpointFile); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzMayParse: whatever mayParse rules out, strconv refuses.
func FuzzMayParse(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "1s", "0x1.8p1", "-Infinity", "nan", "1e5", "0b101", "0o17", "1_000", "1.5.", "+.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if mayParse(s) {
			return
		}
		if _, err := strconv.ParseInt(s, 0, 64); err == nil {
			t.Errorf("mayParse(%q) is false, ParseInt accepts it", s)
		}
		if _, err := strconv.ParseUint(s, 0, 64); err == nil {
			t.Errorf("mayParse(%q) is false, ParseUint accepts it", s)
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			t.Errorf("mayParse(%q) is false, ParseFloat accepts it", s)
		}
	})
}
