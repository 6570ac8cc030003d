package client_test

import (
	"fmt"
	"log"
	"net"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// printer prints what happens to the clusters it watches, and tells
// updated of each update.
type printer struct{ updated chan<- struct{} }

func (p printer) OnUpdate(u client.Update) {
	fmt.Println("cluster", u.Name)
	p.updated <- struct{}{}
}
func (printer) OnError(err error)          { fmt.Println("error:", err) }
func (printer) OnDoesNotExist(name string) { fmt.Println("cluster", name, "does not exist") }

// Example watches every cluster of an xDS server over ADS: here one that
// runs in the example, serving a single cluster.
func Example() {
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(resource.MustNew(&clusterv3.Cluster{
		Name:                 "backend",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
	})))
	gs := grpc.NewServer()
	server.New(c, server.Config{}).Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()

	xc, err := client.New(client.Config{
		Node:        &corev3.Node{Id: "example"},
		Server:      lis.Addr().String(), // for example "localhost:18000", where xdsd serve listens
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		ADS:         true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer xc.Close()
	updated := make(chan struct{}, 1)
	cancel := xc.Watch(resource.ClusterType, "*", printer{updated: updated}) // every cluster
	defer cancel()
	<-updated
	// Output: cluster backend
}
