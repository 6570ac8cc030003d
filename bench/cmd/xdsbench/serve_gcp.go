package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

// serveGCP is `xdsbench serve-gcp --cache snapshot|linear`: go-control-plane
// v0.14, each cache in its best configuration for this workload.
//
// snapshot: one SnapshotCache snapshot shared by all clients (they are
// grouped by node.cluster; ads=false, which only adds watch ordering and
// rejects subset requests). Clusters and endpoints carry their own versions,
// so a change of endpoints does not resend clusters; a change builds a new
// snapshot from the unchanged resource values and the changed ones.
//
// linear: a MuxCache of one LinearCache per type; a change updates only the
// changed endpoint sets (UpdateResource, or UpdateResources for several).
func serveGCP(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve-gcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf serveFlags
	sf.register(fs)
	kind := fs.String("cache", "snapshot", "go-control-plane cache: snapshot or linear")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	clusters := make([]types.Resource, sf.clusters)
	clas := make([]types.Resource, sf.clusters)
	for i := range sf.clusters {
		clusters[i] = newCluster(i)
		clas[i] = newCLA(i, sf.endpoints, 0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		c      cachev3.Cache
		change changer
	)
	switch *kind {
	case "snapshot":
		sc := cachev3.NewSnapshotCache(false, groupByCluster{}, nil)
		clusterRes := cachev3.NewResources("1", clusters)
		publish := func(gen int) error {
			snap := &cachev3.Snapshot{}
			snap.Resources[types.Cluster] = clusterRes
			snap.Resources[types.Endpoint] = cachev3.NewResources(strconv.Itoa(gen), clas)
			return sc.SetSnapshot(ctx, nodeCluster, snap)
		}
		if err := publish(0); err != nil {
			fmt.Fprintln(stderr, "xdsbench:", err)
			return 1
		}
		change = func(gen int, idx []int) error {
			for _, i := range idx {
				clas[i] = newCLA(i, sf.endpoints, gen)
			}
			return publish(gen)
		}
		c = sc
	case "linear":
		byName := func(rs []types.Resource) map[string]types.Resource {
			m := make(map[string]types.Resource, len(rs))
			for i, r := range rs {
				m[clusterName(i)] = r
			}
			return m
		}
		lc := cachev3.NewLinearCache(resourcev3.ClusterType, cachev3.WithInitialResources(byName(clusters)))
		le := cachev3.NewLinearCache(resourcev3.EndpointType, cachev3.WithInitialResources(byName(clas)))
		c = &cachev3.MuxCache{
			Classify:      func(r *cachev3.Request) string { return r.GetTypeUrl() },
			ClassifyDelta: func(r *cachev3.DeltaRequest) string { return r.GetTypeUrl() },
			Caches:        map[string]cachev3.Cache{resourcev3.ClusterType: lc, resourcev3.EndpointType: le},
		}
		change = func(gen int, idx []int) error {
			if len(idx) == 1 {
				return le.UpdateResource(clusterName(idx[0]), newCLA(idx[0], sf.endpoints, gen))
			}
			m := make(map[string]types.Resource, len(idx))
			for _, i := range idx {
				m[clusterName(i)] = newCLA(i, sf.endpoints, gen)
			}
			return le.UpdateResources(m, nil)
		}
	default:
		fmt.Fprintf(stderr, "xdsbench serve-gcp: --cache %q: want snapshot or linear\n", *kind)
		return 2
	}
	srv := serverv3.NewServer(ctx, c, nil)
	return serveUnderTest(sf, grpcGoServer(), func(gs grpc.ServiceRegistrar) { discovery.RegisterAggregatedDiscoveryServiceServer(gs, srv) }, change, stderr)
}

// groupByCluster keys SnapshotCache snapshots by node.cluster: every client
// shares one snapshot.
type groupByCluster struct{}

// ID implements cachev3.NodeHash.
func (groupByCluster) ID(n *corev3.Node) string { return n.GetCluster() }
