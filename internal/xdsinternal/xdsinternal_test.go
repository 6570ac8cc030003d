package xdsinternal_test

import (
	"bytes"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/xdsinternal"
	"github.com/xdsd/xdsd/resource"
)

// TestHooks checks that what cache and resource hand over arrives and
// behaves as its documentation says.
func TestHooks(t *testing.T) {
	cds := resource.Lookup(resource.ClusterType)
	r := resource.MustNew(&clusterv3.Cluster{Name: "a"})
	snap := cache.MustSnapshot(r)

	key, builds := new(int), 0
	build := func() any { builds++; return builds }
	if v1, v2 := xdsinternal.Memo(snap, key, build), xdsinternal.Memo(snap, key, build); v1 != 1 || v2 != 1 || builds != 1 {
		t.Errorf("Memo: got %v then %v after %d builds, want 1 twice after 1", v1, v2, builds)
	}
	if got := xdsinternal.GetBytes(snap, cds, []byte("a")); got != r {
		t.Errorf("GetBytes(a) = %v, want %v", got, r)
	}
	if got := xdsinternal.GetBytes(snap, cds, []byte("b")); got != nil {
		t.Errorf("GetBytes(b) = %v, want nil", got)
	}

	p := xdsinternal.Placeholder(cds, r.Name, r.Version)
	if p.Hash() != r.Hash() || p.Body != nil {
		t.Errorf("Placeholder: hash %x and body %v, want %x and none", p.Hash(), p.Body, r.Hash())
	}
	if xdsinternal.SetVersion(r.Hash()) == xdsinternal.SetVersion(0) {
		t.Error("SetVersion: one version for two sets")
	}

	var sotw discovery.DiscoveryResponse
	if err := proto.Unmarshal(xdsinternal.SotWField(r), &sotw); err != nil || len(sotw.Resources) != 1 ||
		!bytes.Equal(sotw.Resources[0].GetValue(), r.Body.GetValue()) {
		t.Errorf("SotWField: decodes to %v (%v), want the resource's Any", &sotw, err)
	}
	var delta discovery.DeltaDiscoveryResponse
	if err := proto.Unmarshal(xdsinternal.DeltaField(r), &delta); err != nil || len(delta.Resources) != 1 ||
		delta.Resources[0].GetName() != "a" || delta.Resources[0].GetVersion() != r.Version {
		t.Errorf("DeltaField: decodes to %v (%v), want the resource's name and version", &delta, err)
	}

	ts := xdsinternal.RemovalTypes()
	if len(ts) != len(resource.Types()) {
		t.Fatalf("RemovalTypes: %d types, want %d", len(ts), len(resource.Types()))
	}
	for i := 1; i < len(ts); i++ {
		if ts[i-1].RemovalOrder >= ts[i].RemovalOrder {
			t.Errorf("RemovalTypes: %s before %s", ts[i-1].Short, ts[i].Short)
		}
	}

	c := cache.New(nil)
	c.SetSnapshot("", snap)
	node, err := proto.Marshal(&corev3.Node{Id: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	w := xdsinternal.WatchEncoded(c, node, func() {})
	defer w.Close()
	if got, _, _ := w.Take(); got != snap {
		t.Errorf("WatchEncoded: the watcher sees %v, want %v", got, snap)
	}
}
