package e2e_test

import (
	"context"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/resource"
)

// TestDaemon_N1_node_selectors: a stream that connected while no document
// had a node selector moves to its group when a reload adds a document
// whose selector matches its node's metadata, and back when the document
// goes. (Without selectors the daemon groups nothing, and the stream's
// node, kept encoded, is decoded for the first time by that reload.) A
// node that does not match never sees the selected cluster, and
// /config_dump shows each node what it is served.
func TestDaemon_N1_node_selectors(t *testing.T) {
	t.Parallel()
	cfg := newConfigDir(t)
	cfg.writeService(dummyA)
	d := startReady(t, nil, serveArgs(cfg.dir)...)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	cc, err := grpc.NewClient("passthrough:///"+d.xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An Envoy's node: metadata, and extensions the server leaves out. It
	// is repeated in every request, as an Envoy does by default.
	node := &corev3.Node{Id: "edge-1", Cluster: "edge",
		Metadata:   &structpb.Struct{Fields: map[string]*structpb.Value{"role": structpb.NewStringValue("canary")}},
		Extensions: []*corev3.Extension{{Name: "envoy.filters.http.router", Category: "envoy.filters.http"}}}
	clusters := func(want ...string) {
		t.Helper()
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := anyNames(t, r.GetResources())
		if r.GetTypeUrl() != cds || !slices.Equal(got, want) {
			t.Fatalf("%s response with %q, want clusters %q", r.GetTypeUrl(), got, want)
		}
		ack := &discovery.DiscoveryRequest{Node: node, TypeUrl: cds, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
		if err := stream.Send(ack); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: cds}); err != nil {
		t.Fatal(err)
	}
	clusters(svcCluster)

	cfg.write("canary.yaml", "nodes:\n  metadata: {role: canary}\n"+clusterYAML("canary-only")+endpointsItemYAML("canary-only", dummyB))
	clusters(svcCluster, "canary-only")

	other, err := fetchClustersAs(ctx, d.xds, insecure.NewCredentials(), "other")
	if err != nil {
		t.Fatal(err)
	}
	if got := anyNames(t, other.GetResources()); !slices.Equal(got, []string{svcCluster}) {
		t.Errorf("a node the selector does not match got clusters %q, want only %s", got, svcCluster)
	}
	dumped := func(id string) []string { return anyNames(t, d.configDump(ctx, t, id)[cds]) }
	if got := dumped("edge-1"); !slices.Equal(got, []string{svcCluster, "canary-only"}) {
		t.Errorf("/config_dump?node=edge-1 clusters %q, want the selected one too", got)
	}
	if got := dumped("other"); !slices.Equal(got, []string{svcCluster}) {
		t.Errorf("/config_dump?node=other clusters %q, want only %s", got, svcCluster)
	}
	st := d.status(ctx, t)
	var seen bool
	for _, s := range st.Streams {
		seen = seen || s.NodeID == "edge-1" && s.Cluster == "edge"
	}
	if !seen {
		t.Errorf("/status streams %+v: none of node edge-1, cluster edge", st.Streams)
	}

	cfg.remove("canary.yaml")
	clusters(svcCluster)
}

// anyNames returns the names of the resources in list, sorted.
func anyNames(t *testing.T, list []*anypb.Any) []string {
	t.Helper()
	var names []string
	for _, a := range list {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		r, err := resource.New(m)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return names
}
