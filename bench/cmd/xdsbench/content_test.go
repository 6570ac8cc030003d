package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

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
		if len(got) != 1 || got[0].Version != want.Version {
			t.Errorf("%s: YAML decodes to %v, want %v", tc.name, got, tc.msg)
			continue
		}
		if d := cmp.Diff(tc.msg, got[0].Message, protocmp.Transform()); d != "" {
			t.Errorf("%s: YAML decodes to (-want +got):\n%s", tc.name, d)
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

// TestDirStager checks what a change writes to the configuration
// directory: the changed endpoint sets at their new generation and, with
// rewriteAll, every other one again with the bytes it holds; renamed into
// place (a new inode) or written in place.
func TestDirStager(t *testing.T) {
	for _, tc := range []struct {
		name                string
		inPlace, rewriteAll bool
		renamed             []int // endpoint sets given a new inode by the second change
	}{
		{"renamed", false, false, []int{1, 3}},
		{"in place", true, false, nil},
		{"all renamed", false, true, []int{0, 1, 2, 3, 4}},
		{"all in place", true, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			const sets, endpoints = 5, 2
			if err := writeConfigDir(dir, sets, endpoints); err != nil {
				t.Fatal(err)
			}
			stage := dirStager(dir, env{clusters: sets, endpoints: endpoints, inPlace: tc.inPlace, rewriteAll: tc.rewriteAll})
			for gen, idx := range [][]int{{1}, {1, 3}} {
				commit, err := stage(context.Background(), gen+1, idx)
				if err != nil {
					t.Fatal(err)
				}
				before := inodes(t, dir, sets)
				if err := commit(); err != nil {
					t.Fatal(err)
				}
				if gen == 0 {
					continue
				}
				after := inodes(t, dir, sets)
				var renamed []int
				for i := range sets {
					if !os.SameFile(after[i], before[i]) {
						renamed = append(renamed, i)
					}
				}
				if !slices.Equal(renamed, tc.renamed) {
					t.Errorf("second change renamed the endpoint sets %v into place, want %v", renamed, tc.renamed)
				}
			}
			for i, want := range []int{0, 2, 0, 2, 0} { // set 1 changed twice, set 3 once
				got, err := os.ReadFile(claFile(dir, i))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, claYAML(i, endpoints, want)) {
					t.Errorf("endpoint set %d holds\n%s\nwant generation %d", i, got, want)
				}
			}
		})
	}
	if got, want := rewriteOrder([]int{3, 1}, 5), []int{0, 2, 4, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("rewriteOrder = %v, want %v", got, want)
	}
}

// inodes returns the endpoint files' information, for os.SameFile.
func inodes(t *testing.T, dir string, sets int) []os.FileInfo {
	t.Helper()
	out := make([]os.FileInfo, sets)
	for i := range sets {
		info, err := os.Stat(claFile(dir, i))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = info
	}
	return out
}
