package bench

import (
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// XDSDPeer serves the benchmark's endpoints from xdsd's cache and server,
// used as a library: one snapshot for every node, republished whole on each
// change (the cache computes what changed).
type XDSDPeer struct {
	cache  *cache.Cache
	server *server.Server
	others []*resource.Resource // encoded once, reused by every snapshot
}

// NewXDSDPeer returns a peer that also serves others unchanging endpoint
// resources.
func NewXDSDPeer(others int) (*XDSDPeer, error) {
	p := &XDSDPeer{cache: cache.New(nil)}
	p.server = server.New(p.cache, server.Config{})
	for i := 1; i <= others; i++ {
		r, err := resource.New(NewCLA(ResourceName(i), 0))
		if err != nil {
			return nil, err
		}
		p.others = append(p.others, r)
	}
	return p, nil
}

// Register installs every xDS service on s.
func (p *XDSDPeer) Register(s *grpc.Server) { p.server.Register(s) }

// Publish replaces ClusterName's endpoints with version's.
func (p *XDSDPeer) Publish(version int) error {
	r, err := resource.New(NewCLA(ClusterName, version))
	if err != nil {
		return err
	}
	snap, err := cache.NewSnapshot(append(p.others[:len(p.others):len(p.others)], r)...)
	if err != nil {
		return err
	}
	p.cache.SetSnapshot("", snap)
	return nil
}

// Close releases nothing: the streams end with the gRPC server.
func (p *XDSDPeer) Close() {}
