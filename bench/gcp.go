package bench

import (
	"context"
	"errors"
	"strconv"
	"sync"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/config"
	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

var (
	_ Peer = (*SnapshotPeer)(nil)
	_ Peer = (*LinearPeer)(nil)
)

// gcpServer is the part shared by the go-control-plane peers: an xDS server
// from pkg/server/v3 over some cache, and the context that bounds it.
type gcpServer struct {
	srv    serverv3.Server
	cancel context.CancelFunc
}

func newGCPServer(c cachev3.Cache, cb serverv3.Callbacks, orderedADS bool) gcpServer {
	ctx, cancel := context.WithCancel(context.Background())
	var opts []config.XDSOption
	if orderedADS {
		opts = append(opts, sotw.WithOrderedADS())
	}
	return gcpServer{srv: serverv3.NewServer(ctx, c, cb, opts...), cancel: cancel}
}

// Register installs the go-control-plane ADS server on s.
func (g gcpServer) Register(s *grpc.Server) {
	discovery.RegisterAggregatedDiscoveryServiceServer(s, g.srv)
}

// Close cancels the go-control-plane server's context.
func (g gcpServer) Close() { g.cancel() }

// others returns the endpoint resources served besides ClusterName, which
// never change.
func others(count int) []types.Resource {
	out := make([]types.Resource, 0, count)
	for i := 1; i <= count; i++ {
		out = append(out, NewCLA(ResourceName(i), 0))
	}
	return out
}

// SnapshotOptions configures a SnapshotPeer.
type SnapshotOptions struct {
	// Others is the number of ClusterLoadAssignments in every snapshot
	// besides ClusterName. They never change, but every Publish builds a
	// snapshot holding all of them, and in delta the cache hashes all of
	// them once per snapshot.
	Others int
	// ADS is the ads flag of cachev3.NewSnapshotCache. With it, the cache
	// orders watches before responding and only answers a SotW request
	// naming every resource of the snapshot: with Others > 0 it never
	// answers the streams of this benchmark, which name only ClusterName,
	// so NewSnapshotPeer rejects that combination.
	ADS bool
	// PerNode keys snapshots by node id (cachev3.IDHash), so Publish has to
	// set a snapshot for every connected node. Otherwise all nodes share one
	// snapshot, keyed by their cluster (NodeCluster), and Publish sets it
	// once.
	PerNode bool
	// OrderedADS selects the SotW server's ordered ADS loop
	// (sotw.WithOrderedADS) instead of its reflect.Select loop.
	OrderedADS bool
}

// SnapshotPeer serves endpoints from a go-control-plane SnapshotCache: each
// Publish builds a new snapshot with a new version.
type SnapshotPeer struct {
	gcpServer
	opts   SnapshotOptions
	cache  cachev3.SnapshotCache
	others []types.Resource

	// PerNode only: the latest snapshot, given to nodes as they connect.
	// mu also orders those SetSnapshot calls with Publish's.
	mu      sync.Mutex
	current *cachev3.Snapshot
}

// NewSnapshotPeer returns a SnapshotPeer configured by opts.
func NewSnapshotPeer(opts SnapshotOptions) (*SnapshotPeer, error) {
	if opts.ADS && opts.Others > 0 {
		return nil, errors.New("bench: a SnapshotCache with ads=true does not answer SotW requests naming a subset of the snapshot (Others > 0)")
	}
	p := &SnapshotPeer{opts: opts, others: others(opts.Others)}
	var hash cachev3.NodeHash = clusterHash{}
	var cb serverv3.Callbacks
	if opts.PerNode {
		hash = cachev3.IDHash{}
		cb = serverv3.CallbackFuncs{
			StreamRequestFunc: func(_ int64, req *discovery.DiscoveryRequest) error {
				if req.GetResponseNonce() == "" {
					p.greet(req.GetNode().GetId())
				}
				return nil
			},
			StreamDeltaRequestFunc: func(_ int64, req *discovery.DeltaDiscoveryRequest) error {
				if req.GetResponseNonce() == "" {
					p.greet(req.GetNode().GetId())
				}
				return nil
			},
		}
	}
	p.cache = cachev3.NewSnapshotCache(opts.ADS, hash, nil)
	p.gcpServer = newGCPServer(p.cache, cb, opts.OrderedADS)
	return p, nil
}

// greet gives a node that has just connected the current snapshot (PerNode
// only), as a control plane keeping a snapshot per node would.
func (p *SnapshotPeer) greet(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.cache.GetSnapshot(node); err == nil || p.current == nil {
		return
	}
	_ = p.cache.SetSnapshot(context.Background(), node, p.current) // fails only on a canceled context
}

// Publish sets a snapshot, versioned version, in which ClusterName is at
// version and the other resources are unchanged.
func (p *SnapshotPeer) Publish(version int) error {
	res := make([]types.Resource, 0, 1+len(p.others))
	res = append(res, NewCLA(ClusterName, version))
	res = append(res, p.others...)
	snap, err := cachev3.NewSnapshot(strconv.Itoa(version), map[resource.Type][]types.Resource{
		resource.EndpointType: res,
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if !p.opts.PerNode {
		return p.cache.SetSnapshot(ctx, NodeCluster, snap)
	}
	// One snapshot value is shared by all nodes, as a control plane with
	// identical nodes would do; the cache still answers node by node.
	p.mu.Lock()
	defer p.mu.Unlock()
	p.current = snap
	for _, node := range p.cache.GetStatusKeys() {
		if err := p.cache.SetSnapshot(ctx, node, snap); err != nil {
			return err
		}
	}
	return nil
}

// clusterHash groups nodes by their cluster.
type clusterHash struct{}

// ID implements cachev3.NodeHash.
func (clusterHash) ID(node *core.Node) string { return node.GetCluster() }

// LinearOptions configures a LinearPeer.
type LinearOptions struct {
	// Others is the number of ClusterLoadAssignments in the cache besides
	// ClusterName. They never change.
	Others int
	// OrderedADS selects the SotW server's ordered ADS loop
	// (sotw.WithOrderedADS) instead of its reflect.Select loop.
	OrderedADS bool
}

// LinearPeer serves endpoints from a go-control-plane LinearCache: each
// Publish updates ClusterName with UpdateResource.
type LinearPeer struct {
	gcpServer
	cache *cachev3.LinearCache
}

// NewLinearPeer returns a LinearPeer configured by opts.
func NewLinearPeer(opts LinearOptions) *LinearPeer {
	initial := make(map[string]types.Resource, opts.Others)
	for i, r := range others(opts.Others) {
		initial[ResourceName(i+1)] = r
	}
	c := cachev3.NewLinearCache(resource.EndpointType, cachev3.WithInitialResources(initial))
	return &LinearPeer{gcpServer: newGCPServer(c, nil, opts.OrderedADS), cache: c}
}

// Publish updates ClusterName to version.
func (p *LinearPeer) Publish(version int) error {
	return p.cache.UpdateResource(ClusterName, NewCLA(ClusterName, version))
}
