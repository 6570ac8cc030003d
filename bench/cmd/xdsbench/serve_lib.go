package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/h2grpc"
	"github.com/xdsd/xdsd/heaptrim"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// serveXDSDLib is `xdsbench serve-xdsd-lib`: xdsd used as a library, as
// README.md shows. It keeps every resource encoded (resource.New) and, on a
// change, re-encodes only the changed endpoint sets and publishes a whole new
// snapshot of all resources; the cache works out what changed. It serves on
// xdsd's own transport, as xdsd serve does, or with -transport grpc-go on
// grpc-go's, and runs the heap trimmer (heaptrim) beside it.
func serveXDSDLib(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve-xdsd-lib", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf serveFlags
	sf.register(fs)
	transport := fs.String("transport", "xdsd", "the gRPC server transport: xdsd (h2grpc, as xdsd serve) or grpc-go")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var gs xdsServer
	switch *transport {
	case "xdsd":
		// As xdsd serve configures it (internal/app/daemon).
		gs = h2grpc.NewServer(h2grpc.Options{Codec: server.Codec{}, MinPingInterval: 10 * time.Second})
	case "grpc-go":
		gs = grpcGoServer()
	default:
		fmt.Fprintf(stderr, "xdsbench: -transport %q: want xdsd or grpc-go\n", *transport)
		return 2
	}
	all := make([]*resource.Resource, 2*sf.clusters) // clusters, then endpoint sets
	for i := range sf.clusters {
		var err error
		if all[i], err = resource.New(newCluster(i)); err == nil {
			all[sf.clusters+i], err = resource.New(newCLA(i, sf.endpoints, 0))
		}
		if err != nil {
			fmt.Fprintln(stderr, "xdsbench:", err)
			return 1
		}
	}
	c := cache.New(nil)
	srv := server.New(c, server.Config{})
	publish := func() error {
		snap, err := cache.NewSnapshot(all...)
		if err != nil {
			return err
		}
		c.SetSnapshot("", snap)
		return nil
	}
	if err := publish(); err != nil {
		fmt.Fprintln(stderr, "xdsbench:", err)
		return 1
	}
	change := func(gen int, idx []int) error {
		for _, i := range idx {
			r, err := resource.New(newCLA(i, sf.endpoints, gen))
			if err != nil {
				return err
			}
			all[sf.clusters+i] = r
		}
		return publish()
	}
	// The heap trimmer, as README.md recommends to programs that embed the
	// server (xdsd serve runs the same one).
	ctx, stopTrim := context.WithCancel(context.Background())
	trimmed := make(chan struct{})
	go func() {
		defer close(trimmed)
		heaptrim.Run(ctx, nil, srv)
	}()
	defer func() {
		stopTrim()
		<-trimmed
	}()
	return serveUnderTest(sf, gs, srv.Register, change, stderr)
}
