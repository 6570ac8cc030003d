package main

import (
	"context"
	"net"
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/server"
)

// TestFloorSubsets checks what the floor server sends to streams subscribed
// to some endpoint sets only (the benchmark subscribes to all): the
// requested sets, nothing for an ACK, and only the subscribed ones of a
// change, after the response to the subscription.
func TestFloorSubsets(t *testing.T) {
	s, err := newFloor(10, 2)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(server.GRPCOptions()...)
	discovery.RegisterAggregatedDiscoveryServiceServer(gs, s)
	go func() { _ = gs.Serve(lis) }() // ends with gs.Stop
	defer gs.Stop()
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ads := discovery.NewAggregatedDiscoveryServiceClient(cc)

	sotw, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	delta, err := ads.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each stream's CDS: all clusters, once.
	must(sotw.Send(&discovery.DiscoveryRequest{TypeUrl: clusterTypeURL}))
	must(delta.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: clusterTypeURL}))
	r, err := sotw.Recv()
	must(err)
	if len(r.Resources) != 10 || r.TypeUrl != clusterTypeURL {
		t.Fatalf("SotW CDS: %d resources of %s", len(r.Resources), r.TypeUrl)
	}
	must(sotw.Send(&discovery.DiscoveryRequest{TypeUrl: clusterTypeURL, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}))
	dr, err := delta.Recv()
	must(err)
	if len(dr.Resources) != 10 || dr.TypeUrl != clusterTypeURL {
		t.Fatalf("delta CDS: %d resources of %s", len(dr.Resources), dr.TypeUrl)
	}
	must(delta.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: clusterTypeURL, ResponseNonce: dr.Nonce}))

	// Subscriptions: SotW to 2 and 3, delta to 1, 2, 4, then 5 and not 4.
	names := []string{clusterName(2), clusterName(3)}
	must(sotw.Send(&discovery.DiscoveryRequest{TypeUrl: endpointTypeURL, ResourceNames: names}))
	r, err = sotw.Recv()
	must(err)
	checkCLAs(t, "SotW subscription", r.Resources, []int{2, 3}, 0)
	must(sotw.Send(&discovery.DiscoveryRequest{TypeUrl: endpointTypeURL, ResourceNames: names,
		VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}))
	must(delta.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: endpointTypeURL,
		ResourceNamesSubscribe: []string{clusterName(1), clusterName(2), clusterName(4)}}))
	dr, err = delta.Recv()
	must(err)
	checkCLAs(t, "delta subscription", deltaBodies(dr), []int{1, 2, 4}, 0)
	must(delta.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: endpointTypeURL, ResponseNonce: dr.Nonce,
		ResourceNamesSubscribe: []string{clusterName(5)}, ResourceNamesUnsubscribe: []string{clusterName(4)}}))
	dr, err = delta.Recv()
	must(err)
	checkCLAs(t, "delta subscription", deltaBodies(dr), []int{5}, 0)

	// A change: each stream gets the changed sets it subscribed to; the
	// ACKs above got nothing.
	must(s.change(1, []int{2, 4, 5}))
	dr, err = delta.Recv()
	must(err)
	checkCLAs(t, "delta change", deltaBodies(dr), []int{2, 5}, 1)
	r, err = sotw.Recv()
	must(err)
	checkCLAs(t, "SotW change", r.Resources, []int{2}, 1)
}

// deltaBodies returns the resources of a delta response.
func deltaBodies(r *discovery.DeltaDiscoveryResponse) []*anypb.Any {
	var out []*anypb.Any
	for _, dr := range r.Resources {
		out = append(out, dr.Resource)
	}
	return out
}

// checkCLAs checks that rs are the endpoint sets idx at generation gen.
func checkCLAs(t *testing.T, what string, rs []*anypb.Any, idx []int, gen int32) {
	t.Helper()
	var got []int
	for _, a := range rs {
		name, err := resourceName(a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		i, err := clusterIndex(name, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if g, err := parseMarker(a.Value); err != nil || g != gen {
			t.Errorf("%s: %s at generation %d (%v), want %d", what, name, g, err, gen)
		}
		got = append(got, i)
	}
	slices.Sort(got)
	if !slices.Equal(got, idx) {
		t.Errorf("%s: endpoint sets %v, want %v", what, got, idx)
	}
}
