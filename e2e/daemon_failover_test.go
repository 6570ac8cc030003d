package e2e_test

import (
	"context"
	"fmt"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/etcdstore"
)

// adsClient returns an ADS client of the daemon's xDS port.
func adsClient(t *testing.T, d *daemonProc) discovery.AggregatedDiscoveryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+d.xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return discovery.NewAggregatedDiscoveryServiceClient(cc)
}

// TestDaemon_etcd_failover_resends_nothing: versions are content hashes,
// the same on every replica, so a client that moves from one replica to
// another with what it holds is sent nothing of it: a delta client that
// names its versions in initial_resource_versions (PROTOCOL D6), a SotW
// wildcard client that names the version it holds (S13). What changed
// meanwhile it is sent.
func TestDaemon_etcd_failover_resends_nothing(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	cli := etcd.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	first, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: serviceFiles(dummyA), Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	r1 := startReady(t, nil, etcdServeArgs(etcd.Endpoint, "r1")...)
	r2 := startReady(t, nil, etcdServeArgs(etcd.Endpoint, "r2")...)
	deltaOn := func(d *daemonProc) *rawxds.Delta {
		c := adsClient(t, d)
		return rawxds.Open(t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse], error) {
			return c.DeltaAggregatedResources(ctx)
		})
	}
	sotwOn := func(d *daemonProc) *rawxds.SotW {
		c := adsClient(t, d)
		return rawxds.Open(t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse], error) {
			return c.StreamAggregatedResources(ctx)
		})
	}

	t.Run("D6_delta_client_moved_with_its_versions", func(t *testing.T) {
		s1 := deltaOn(r1)
		s1.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("mover"), TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{svcCluster}})
		r := s1.Recv()
		if id, want := r.GetControlPlane().GetIdentifier(), fmt.Sprintf("xdsd r1 revision %d", first.Revision); id != want {
			t.Fatalf("control_plane.identifier %q, want %q: the replica and the revision it serves", id, want)
		}
		held := map[string]string{}
		for _, res := range r.GetResources() {
			held[res.GetName()] = res.GetVersion()
		}
		if held[svcCluster] == "" {
			t.Fatalf("first response %v lacks %s", r, svcCluster)
		}
		s1.Close() // r1 is gone, for this client
		s2 := deltaOn(r2)
		s2.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("mover"), TypeUrl: resource.EndpointType,
			ResourceNamesSubscribe: []string{svcCluster}, InitialResourceVersions: held})
		s2.ExpectNone()
		if _, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: map[string][]byte{endpointsFile: []byte(endpointsYAML(svcCluster, dummyB))}}); err != nil {
			t.Fatal(err)
		}
		r = s2.Recv()
		if len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != svcCluster || r.GetResources()[0].GetVersion() == held[svcCluster] {
			t.Fatalf("after the change r2 sent %v", r)
		}
	})

	t.Run("S13_sotw_wildcard_client_moved_at_its_version", func(t *testing.T) {
		s1 := sotwOn(r1)
		s1.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("mover-sotw"), TypeUrl: resource.ClusterType})
		r := s1.Recv()
		s1.Close()
		s2 := sotwOn(r2)
		s2.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("mover-sotw"), TypeUrl: resource.ClusterType, VersionInfo: r.GetVersionInfo()})
		s2.ExpectNone()
	})
}
