package resource_test

import (
	"bytes"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
)

// TestResponseFields: a resource's response entries decode, as part of a
// response, to the resource; a placeholder compares equal to it by hash
// and has no body; set versions tell sets apart.
func TestResponseFields(t *testing.T) {
	r := resource.MustNew(&clusterv3.Cluster{Name: "a"})

	var sotw discovery.DiscoveryResponse
	if err := proto.Unmarshal(r.SotWField(), &sotw); err != nil || len(sotw.Resources) != 1 ||
		!bytes.Equal(sotw.Resources[0].GetValue(), r.Body.GetValue()) {
		t.Errorf("SotWField: decodes to %v (%v), want the resource's Any", &sotw, err)
	}
	var delta discovery.DeltaDiscoveryResponse
	if err := proto.Unmarshal(r.DeltaField(), &delta); err != nil || len(delta.Resources) != 1 ||
		delta.Resources[0].GetName() != "a" || delta.Resources[0].GetVersion() != r.Version {
		t.Errorf("DeltaField: decodes to %v (%v), want the resource's name and version", &delta, err)
	}

	p := resource.Placeholder(r.Type, r.Name, r.Version)
	if p.Hash() != r.Hash() || p.Body != nil {
		t.Errorf("Placeholder: hash %x and body %v, want %x and none", p.Hash(), p.Body, r.Hash())
	}
	if resource.SetVersion(r.Hash()) == resource.SetVersion(0) {
		t.Error("SetVersion: one version for two sets")
	}
}

// TestRemovalTypes: every type, in RemovalOrder.
func TestRemovalTypes(t *testing.T) {
	ts := resource.RemovalTypes()
	if len(ts) != resource.NumTypes {
		t.Fatalf("RemovalTypes: %d types, want %d", len(ts), resource.NumTypes)
	}
	for i := 1; i < len(ts); i++ {
		if ts[i-1].RemovalOrder >= ts[i].RemovalOrder {
			t.Errorf("RemovalTypes: %s before %s", ts[i-1].Short, ts[i].Short)
		}
	}
}
