package main

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestEnvoyNode checks that an Envoy-like node is about the size an Envoy's
// is, and that the fleet's nodes share all but their ids.
func TestEnvoyNode(t *testing.T) {
	a, b := newNode(nodeEnvoy, 1), newNode(nodeEnvoy, 2)
	size := proto.Size(a)
	if size < 30<<10 || size > 60<<10 {
		t.Errorf("an Envoy-like node is %d bytes, want 30-60 KB", size)
	}
	if a.GetId() == b.GetId() || len(a.GetExtensions()) < 250 || &a.GetExtensions()[0] != &b.GetExtensions()[0] {
		t.Errorf("ids %q, %q; %d extensions; shared: %v", a.GetId(), b.GetId(), len(a.GetExtensions()), &a.GetExtensions()[0] == &b.GetExtensions()[0])
	}
	if err := a.ValidateAll(); err != nil {
		t.Error(err)
	}
	if m := newNode(nodeMinimal, 3); m.GetId() != "xdsbench-3" || m.GetCluster() != nodeCluster || proto.Size(m) > 64 {
		t.Errorf("minimal node %v", m)
	}
}
