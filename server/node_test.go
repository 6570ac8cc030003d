package server_test

import (
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/server"
)

// envoyLikeNode is a node with every field an Envoy sets, extensions
// included.
func envoyLikeNode(id string) *corev3.Node {
	n := &corev3.Node{
		Id: id, Cluster: "c", UserAgentName: "envoy",
		UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
			Version: &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 36, Patch: 2},
		}},
		Metadata:       &structpb.Struct{Fields: map[string]*structpb.Value{"team": structpb.NewStringValue("a")}},
		Locality:       &corev3.Locality{Zone: "z"},
		ClientFeatures: []string{"envoy.lb.does_not_support_overprovisioning"},
	}
	for _, name := range []string{"envoy.filters.http.router", "envoy.filters.network.tcp_proxy"} {
		n.Extensions = append(n.Extensions, &corev3.Extension{Name: name, Category: "envoy.filters", TypeUrls: []string{"t." + name}})
	}
	return n
}

// TestNodeKeptWithoutExtensions checks that a stream keeps its node without
// the extensions list, in its status and for grouping, and keeps every
// other field; and that requests repeating the whole node are ACKs as usual.
func TestNodeKeptWithoutExtensions(t *testing.T) {
	var mu sync.Mutex
	var grouped []*corev3.Node
	c := cache.New(func(n *corev3.Node) string {
		mu.Lock()
		defer mu.Unlock()
		grouped = append(grouped, n)
		return ""
	})
	c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1)))
	e := rawxds.Start(t, c, server.Config{})
	sent := envoyLikeNode("n1")
	want := proto.Clone(sent).(*corev3.Node)
	want.Extensions = nil

	check := func(variant string) {
		t.Helper()
		var st *server.StreamStatus
		for _, s := range e.Server.Status() {
			if s.Node.GetId() == "n1" && s.Variant == variant {
				st = &s
			}
		}
		if st == nil {
			t.Fatalf("no %s stream of n1 in %v", variant, e.Server.Status())
		}
		if d := cmp.Diff(want, st.Node, protocmp.Transform()); d != "" {
			t.Errorf("%s status node (-want +got):\n%s", variant, d)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, n := range grouped {
			if len(n.GetExtensions()) > 0 {
				t.Errorf("grouped by a node with its extensions: %v", n)
			}
		}
	}

	s := e.ADS(t)
	s.Send(&discovery.DiscoveryRequest{Node: sent, TypeUrl: eds, ResourceNames: []string{"c1"}})
	r := s.Recv()
	// The ACK repeats the node, as an Envoy does by default; then a change
	// must still reach the stream.
	s.Send(&discovery.DiscoveryRequest{Node: sent, TypeUrl: eds, ResourceNames: []string{"c1"}, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
	c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("c1"), rawxds.Endpoints("c1", 2)))
	if r2 := s.Recv(); r2.VersionInfo == r.VersionInfo {
		t.Fatalf("no new version after the ACK: %v", r2)
	}
	check("ads/sotw")

	d := e.DeltaADS(t)
	d.Send(&discovery.DeltaDiscoveryRequest{Node: sent, TypeUrl: eds, ResourceNamesSubscribe: []string{"c1"}})
	dr := d.Recv()
	d.Send(&discovery.DeltaDiscoveryRequest{Node: sent, TypeUrl: eds, ResponseNonce: dr.Nonce})
	c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("c1"), rawxds.Endpoints("c1", 3)))
	if dr2 := d.Recv(); len(dr2.Resources) != 1 {
		t.Fatalf("no change after the ACK: %v", dr2)
	}
	check("ads/delta")
	if len(sent.Extensions) != 2 {
		t.Fatalf("the sent node lost its extensions: %v", sent)
	}
}
