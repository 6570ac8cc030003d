package configdir

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"
)

// yamlV3Documents decodes data's documents as yaml.v3 decodes each into a
// fresh interface{}.
func yamlV3Documents(data []byte) ([]any, error) {
	return eachDocument(data, func(d *yaml.Decoder) (any, error) {
		var v any
		err := d.Decode(&v)
		return v, err
	})
}

// agreesWithYAMLv3 fails t unless decodeYAML decodes data to yaml.v3's
// values, or fails where yaml.v3 fails.
func agreesWithYAMLv3(t *testing.T, data []byte) {
	t.Helper()
	got, err := decodeYAML(data)
	want, wantErr := yamlV3Documents(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decodeYAML(%q): error %v, yaml.v3's %v", data, err, wantErr)
	}
	if err != nil {
		return
	}
	if diff := cmp.Diff(any(want), plain(got), cmpopts.EquateNaNs()); diff != "" {
		t.Fatalf("decodeYAML(%q) differs from yaml.v3 (-yaml.v3 +decodeYAML):\n%s", data, diff)
	}
}

// readFromTree are documents as configuration files hold them, which
// decodeYAML reads from yaml.v3's tree without decoding them again.
var readFromTree = []string{
	"",
	"# only a comment\n\n",
	"a: 1\n",
	"---\na: b\n",
	"a: b\n---\nc: d\n---\n- e\n",
	"resources:\n- \"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\n  cluster_name: c-1\n  endpoints:\n  - locality: {region: bench, zone: bench-a}\n    load_balancing_weight: 1\n    lb_endpoints:\n    - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 8080}}}\n      load_balancing_weight: 2\n",
	"a:\n  b:\n    c: [1, -2, x y, 'q''s', \"d\\\"q\\u00e9\"]\n  e: []\n  f: {}\n",
	"a: ~\nb: null\nc: true\nd: false\ne:\nf: yes\ng: on\nh: 0\ni: -0\nj: 123456789012345678\n",
	"a: 10.0.0.1\nb: 1s\nc: 0.5s\nd: 1-2\ne: v3\nf: \"1\"\ng: '2.5'\n",
	"a: |\n  text\nb: >\n  folded\n  text\nc: 'multi\n  line'\n",
	"a: &x {b: 1}\nc: !!str 1\n",
}

// leftToYAMLv3 are documents decodeYAML leaves to yaml.v3's own decoding,
// valid or not.
var leftToYAMLv3 = []string{
	"a: &x 1\nb: *x\n", "a: 1\na: 2\n", "1: a\n", "true: a\n", "null: a\n", "<<: {a: 1}\n",
	"? [a]\n: b\n",
}

// otherScalars are scalars decodeYAML has yaml.v3 decode one by one.
var otherScalars = []string{
	"a: 1.5\n", "a: 1e3\n", "a: .inf\n", "a: -.Inf\n", "a: .nan\n", "a: 0x1f\n", "a: 0o17\n",
	"a: 017\n", "a: 1_000\n", "a: 2001-12-14\n", "a: +1\n", "a: 12345678901234567890\n",
	"a: True\n", "a: FALSE\n", "a: -0x1\n", "a: !custom b\n", "a: !!binary aGk=\n",
}

func TestDecodeYAMLReadsFromTheTree(t *testing.T) {
	for _, in := range readFromTree {
		agreesWithYAMLv3(t, []byte(in))
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(in), &n); err != nil {
			t.Fatal(err)
		}
		if n.Kind == 0 { // no document, which decodeYAML never reads
			continue
		}
		if _, ok := nodeValue(&n); !ok {
			t.Errorf("%q is decoded by yaml.v3 again; it is read from the tree", in)
		}
	}
}

func TestDecodeYAMLLeavesToYAMLv3(t *testing.T) {
	for _, in := range append(append([]string{}, leftToYAMLv3...), otherScalars...) {
		agreesWithYAMLv3(t, []byte(in))
	}
	for _, in := range leftToYAMLv3 {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(in), &n); err != nil {
			continue
		}
		if _, ok := nodeValue(&n); ok {
			t.Errorf("%q is read from the tree; it is yaml.v3's to decode", in)
		}
	}
}

// TestDecodeYAMLRepeatedKeys: a repeated key is refused in a short
// mapping and a long one alike.
func TestDecodeYAMLRepeatedKeys(t *testing.T) {
	for _, n := range []int{2, shortMapping, shortMapping + 1, 100} {
		var b strings.Builder
		for i := range n {
			b.WriteString("k" + strings.Repeat("x", i) + ": 1\n")
		}
		agreesWithYAMLv3(t, []byte(b.String()))
		b.WriteString("k: 2\n")
		if _, err := decodeYAML([]byte(b.String())); err == nil {
			t.Errorf("a mapping of %d keys with one repeated: no error", n+1)
		}
	}
}

// TestDecodeYAMLAliasBomb: a document whose aliases stand for
// exponentially many nodes is refused, not expanded.
func TestDecodeYAMLAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	if _, err := decodeYAML([]byte(b.String())); err == nil {
		t.Error("a billion laughs decoded")
	}
}

// FuzzDecodeYAML checks decodeYAML against yaml.v3's own decoding.
func FuzzDecodeYAML(f *testing.F) {
	for _, in := range readFromTree {
		f.Add([]byte(in))
	}
	for _, in := range leftToYAMLv3 {
		f.Add([]byte(in))
	}
	for _, in := range otherScalars {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		agreesWithYAMLv3(t, data)
	})
}
