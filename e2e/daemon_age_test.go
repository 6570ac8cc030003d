package e2e_test

import (
	"context"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
)

// TestDaemon_max_connection_age: past --max-connection-age and its grace,
// an xDS stream, which never ends by itself, is ended with UNAVAILABLE,
// so that its client reconnects (to any replica); the client's new stream
// is served. On both gRPC transports.
func TestDaemon_max_connection_age(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"xdsd", "grpc-go"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			cfg := newConfigDir(t)
			cfg.writeService(dummyA)
			d := startReady(t, nil, serveArgs(cfg.dir, "--grpc-transport", transport,
				"--max-connection-age", "300ms", "--max-connection-age-grace", "300ms")...)
			c := adsClient(t, d)
			open := func() *rawxds.SotW {
				return rawxds.Open(t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse], error) {
					return c.StreamAggregatedResources(ctx)
				})
			}
			s := open()
			s.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("aged"), TypeUrl: resource.ClusterType})
			s.Recv()
			if err := s.Err(); status.Code(err) != codes.Unavailable {
				t.Fatalf("the stream ended with %v, want UNAVAILABLE", err)
			}
			s2 := open()
			s2.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("aged"), TypeUrl: resource.ClusterType})
			s2.Recv()
			s2.Close()
		})
	}
}
