package client_test

import (
	"fmt"
	"log"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
)

// printer prints what happens to the clusters it watches.
type printer struct{}

func (printer) OnUpdate(u client.Update)   { fmt.Println("cluster", u.Name, "version", u.Version) }
func (printer) OnError(err error)          { fmt.Println("error:", err) }
func (printer) OnDoesNotExist(name string) { fmt.Println("cluster", name, "does not exist") }

func Example() {
	c, err := client.New(client.Config{
		Node:        &corev3.Node{Id: "example"},
		Server:      "localhost:18000",
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		ADS:         true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cancel := c.Watch(resource.ClusterType, "*", printer{}) // every cluster
	defer cancel()
}
