package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
)

// TestYAMLMatchesProto checks that the configuration directory and the
// in-process servers serve the same content: the YAML an operator would
// write decodes to the messages the serve-* subcommands build.
func TestYAMLMatchesProto(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml []byte
		msg  proto.Message
	}{
		{"cluster", clusterYAML(7), newCluster(7)},
		{"cla gen 0", claYAML(300, 4, 0), newCLA(300, 4, 0)},
		{"cla gen 12", claYAML(70000, 3, 12), newCLA(70000, 3, 12)},
	} {
		got, err := configdir.ParseFile(tc.name+".yaml", tc.yaml)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, tc.yaml)
		}
		want := resource.MustNew(tc.msg)
		if len(got) != 1 || got[0].Version != want.Version || !proto.Equal(got[0].Message, tc.msg) {
			t.Errorf("%s: YAML decodes to %v, want %v", tc.name, got, tc.msg)
		}
	}
}

// TestParse checks the wire-format readers the clients use against the
// messages they read.
func TestParse(t *testing.T) {
	for _, gen := range []int{0, 1, 41, 1 << 20} {
		b, err := proto.Marshal(newCLA(12, 4, gen))
		if err != nil {
			t.Fatal(err)
		}
		if name, err := parseName(b); err != nil || name != "cluster-12" {
			t.Errorf("parseName = %q, %v", name, err)
		}
		if m, err := parseMarker(b); err != nil || int(m) != gen {
			t.Errorf("parseMarker = %d, %v; want %d", m, err, gen)
		}
	}
	b, err := proto.Marshal(newCluster(5))
	if err != nil {
		t.Fatal(err)
	}
	if name, err := parseName(b); err != nil || name != "cluster-5" {
		t.Errorf("parseName(cluster) = %q, %v", name, err)
	}
	if _, err := parseMarker(b); err == nil {
		t.Error("parseMarker(cluster): no error")
	}
	if _, err := clusterIndex("cluster-10", 10); err == nil {
		t.Error("clusterIndex accepted an index out of range")
	}
}
