package server_test

import (
	"runtime"
	"strings"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/internal/testutil/stacks"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// serverGoroutines counts the goroutines running xdsd's server code, those
// among them that are a stream's handler, and the server's idle workers.
func serverGoroutines() (all, handlers, workers int) {
	for _, g := range stacks.In("github.com/xdsd/xdsd/server.") {
		all++
		if strings.Contains(g, "github.com/xdsd/xdsd/server.serve[") {
			handlers++
		}
		if strings.Contains(g, "github.com/xdsd/xdsd/server.(*workers).work") {
			workers++
		}
	}
	return all, handlers, workers
}

// TestIdleStreamGoroutines checks that an idle stream keeps one goroutine
// of its own, its handler blocked in Recv: a publication borrows one of the
// server's workers, whose number does not grow with the streams (at most
// 4 per CPU while none is stuck). At fleet scale every goroutine costs a
// stack per client.
func TestIdleStreamGoroutines(t *testing.T) {
	snap := func(port uint32) *cache.Snapshot {
		return cache.MustSnapshot(rawxds.Cluster("c1"), rawxds.Endpoints("c1", port))
	}
	c := cache.New(nil)
	c.SetSnapshot("", snap(1))
	e := rawxds.Start(t, c, server.Config{})

	const n = 8
	sotw := make([]*rawxds.SotW, n)
	delta := make([]*rawxds.Delta, n)
	for i := range n {
		sotw[i] = e.ADS(t)
		sotw[i].Send(&discovery.DiscoveryRequest{Node: rawxds.Node("idle"), TypeUrl: resource.EndpointType, ResourceNames: []string{"c1"}})
		r := sotw[i].Recv()
		sotw[i].Send(ack(r, "c1"))
		delta[i] = e.DeltaADS(t)
		delta[i].Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("idle"), TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"c1"}})
		d := delta[i].Recv()
		delta[i].Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: d.Nonce})
	}
	idle := func() bool {
		all, handlers, workers := serverGoroutines()
		if all != handlers+workers || handlers != 2*n || workers > 4*runtime.GOMAXPROCS(0) {
			t.Logf("%d goroutines in xdsd's server code, %d of them handlers and %d workers; want %d handlers, at most %d workers and nothing else",
				all, handlers, workers, 2*n, 4*runtime.GOMAXPROCS(0))
			return false
		}
		return true
	}
	waitFor(t, idle)

	c.SetSnapshot("", snap(2))
	for i := range n {
		r := sotw[i].Recv()
		wantNames(t, r, "c1")
		sotw[i].Send(ack(r, "c1"))
		d := delta[i].Recv()
		wantDeltaNames(t, d, "c1")
		delta[i].Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: d.Nonce})
	}
	waitFor(t, idle)
}
