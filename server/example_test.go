package server_test

import (
	"context"
	"fmt"
	"net"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// Example creates a cache and a server, publishes one cluster and serves it
// over ADS; a client then fetches it.
func Example() {
	// Create: a cache (every node in one group) and a server over it.
	c := cache.New(nil)
	srv := server.New(c, server.Config{})

	// Set resources: a snapshot is immutable and published atomically.
	cluster := resource.MustNew(&clusterv3.Cluster{
		Name:                 "backend",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{}},
		},
	})
	c.SetSnapshot("", cache.MustSnapshot(cluster))

	// Serve: register every xDS service on a gRPC server.
	gs := grpc.NewServer()
	srv.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()

	// A client subscribes to every cluster.
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ads, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		panic(err)
	}
	ads.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "example"}, TypeUrl: resource.ClusterType})
	resp, err := ads.Recv()
	if err != nil {
		panic(err)
	}
	var got clusterv3.Cluster
	if err := resp.Resources[0].UnmarshalTo(&got); err != nil {
		panic(err)
	}
	fmt.Println(len(resp.Resources), "cluster:", got.GetName())
	// Output: 1 cluster: backend
}
