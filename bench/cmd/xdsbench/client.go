package main

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
)

// The clients' HTTP/2 and gRPC implementations.
const (
	clientGRPC = "grpc" // grpc-go's client: a reader and a writer goroutine per connection
	clientH2   = "h2"   // h2Stream, on the client's own goroutine
)

// failoverBackoff is the mean wait of a failover client before it tries a
// replica again (Envoy's xDS retry base interval is 500 ms).
const failoverBackoff = 500 * time.Millisecond

// fleetConfig sizes a fleet of clients.
type fleetConfig struct {
	clients        int    // number of ADS streams
	clusters       int    // clusters the server serves (each with one endpoint set)
	delta          bool   // incremental instead of state of the world
	client         string // clientGRPC or clientH2
	streamsPerConn int    // ADS streams multiplexed on one gRPC connection (grpc only)
	readBuffer     int    // grpc.WithReadBufferSize, per connection (grpc only)
	writeBuffer    int    // grpc.WithWriteBufferSize, per connection (grpc only)
	window         int    // initial HTTP/2 stream window (connection: × streamsPerConn)
	node           string // nodeMinimal or nodeEnvoy
	repeatNode     bool   // send the node in every request, not only the first
	// failover makes a delta grpc client whose stream fails resume on the
	// next address, with initial_resource_versions of what it holds.
	failover bool
}

// fleet is N Envoy-like ADS clients of one server, in this process. Each
// client subscribes to CDS (wildcard), then to EDS for every cluster it
// learns, and ACKs every response. The fleet counts what the clients
// receive and tells, per round, when each client holds the new content.
type fleet struct {
	cfg   fleetConfig
	addrs []string           // the servers' addresses: connection (or h2 client) i goes to addrs[i mod len]
	conns []*grpc.ClientConn // grpc clients' connections
	bytes atomic.Int64       // bytes read from the server, all connections
	cur   atomic.Pointer[round]
	// resumed, when set, is the round of the clients that resume on
	// another address (failover): each completes it at its first response
	// there.
	resumed atomic.Pointer[round]
	errc    chan error // the first stream failure

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// round is one state the fleet waits for: the initial state (gen 0: every
// client holds every cluster and endpoint set), or generation gen of the
// endpoint sets marked in changed.
type round struct {
	gen       int32
	changed   []bool // by cluster index; nil for the initial state
	k         int    // number of true entries in changed
	remaining atomic.Int64
	done      chan struct{} // closed when remaining reaches 0
	at        []time.Time   // when each client got there; written by that client
}

func newRound(clients int, gen int32, changed []int, clusters int) *round {
	r := &round{gen: gen, done: make(chan struct{}), at: make([]time.Time, clients)}
	r.remaining.Store(int64(clients))
	if changed != nil {
		r.changed = make([]bool, clusters)
		for _, i := range changed {
			r.changed[i] = true
		}
		r.k = len(changed)
	}
	return r
}

// complete records that client id got there at t.
func (r *round) complete(id int, t time.Time) {
	r.at[id] = t
	if r.remaining.Add(-1) == 0 {
		close(r.done)
	}
}

// hashSeed is shared by all clients: a resource's bytes hash the same in
// every client.
var hashSeed = maphash.MakeSeed()

// startFleet opens the fleet's connections to addrs, spread evenly over
// them, and starts its clients.
// The initial round is already in place when it returns: wait on it with
// wait. Call stop when done, also after an error.
func startFleet(addrs []string, cfg fleetConfig) (*fleet, *round, error) {
	f := &fleet{cfg: cfg, addrs: addrs, errc: make(chan error, 1)}
	initial := newRound(cfg.clients, 0, nil, cfg.clusters)
	f.cur.Store(initial)
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	nconns := (cfg.clients + cfg.streamsPerConn - 1) / cfg.streamsPerConn
	if cfg.client == clientH2 {
		nconns = 0 // each client dials its own
	}
	for j := range nconns {
		addr := addrs[j%len(addrs)]
		cc, err := f.dial(addr)
		if err != nil {
			f.stop()
			return nil, nil, err
		}
		f.conns = append(f.conns, cc)
	}
	for i := range cfg.clients {
		c := &client{
			f:        f,
			id:       i,
			node:     newNode(cfg.node, i),
			clusters: make([]uint64, cfg.clusters),
			clas:     make([]uint64, cfg.clusters),
			markers:  make([]int32, cfg.clusters),
		}
		if cfg.failover {
			c.clusterVer, c.claVer = make([]string, cfg.clusters), make([]string, cfg.clusters)
		}
		if cfg.repeatNode {
			c.repeatedNode = c.node
			var err error
			if c.nodeBytes, err = marshalRequest.Marshal(c.node); err != nil {
				f.stop()
				return nil, nil, err
			}
		}
		f.wg.Go(func() {
			if err := c.run(ctx); err != nil && ctx.Err() == nil {
				f.fail(fmt.Errorf("client %d: %w", i, err))
			}
		})
	}
	return f, initial, nil
}

// dial opens a grpc connection to addr counting the bytes read into
// f.bytes.
func (f *fleet) dial(addr string) (*grpc.ClientConn, error) {
	cfg := f.cfg
	dialer := &net.Dialer{}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, "tcp", a)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: c, n: &f.bytes}, nil
		}),
		grpc.WithReadBufferSize(cfg.readBuffer),
		grpc.WithWriteBufferSize(cfg.writeBuffer),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1 << 30)),
	}
	if cfg.window > 0 { // else grpc-go's default: windows sized by its bandwidth probe's pings
		opts = append(opts, grpc.WithInitialWindowSize(int32(cfg.window)),
			grpc.WithInitialConnWindowSize(int32(cfg.window*min(cfg.streamsPerConn, 64))))
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return cc, nil
}

// home returns the index of the address client id connects to first.
func (f *fleet) home(id int) int {
	if f.cfg.client == clientH2 {
		return id % len(f.addrs)
	}
	return (id / f.cfg.streamsPerConn) % len(f.addrs)
}

// run opens the client's ADS stream and runs it until ctx is done or the
// stream fails.
func (c *client) run(ctx context.Context) error {
	cfg := c.f.cfg
	if cfg.client == clientH2 {
		if cfg.delta {
			st, err := dialH2[*discovery.DeltaDiscoveryRequest](ctx, c.f.addrs[c.id%len(c.f.addrs)], deltaPath, cfg.window, &c.f.bytes, newDeltaResponse)
			if err != nil {
				return err
			}
			defer st.Close()
			return c.runDelta(st)
		}
		st, err := dialH2[*discovery.DiscoveryRequest](ctx, c.f.addrs[c.id%len(c.f.addrs)], sotwPath, cfg.window, &c.f.bytes, newSotWResponse)
		if err != nil {
			return err
		}
		defer st.Close()
		return c.runSotW(st)
	}
	ads := discovery.NewAggregatedDiscoveryServiceClient(c.f.conns[c.id/cfg.streamsPerConn])
	if cfg.delta {
		st, err := ads.DeltaAggregatedResources(ctx)
		if err == nil {
			err = c.runDelta(st)
		}
		// Failover: on to the next replica, and the next, as a client
		// that knows them all; one refused (an admission limit) or
		// unreachable is tried again after a jittered backoff, as Envoy
		// does, until the run ends.
		for attempt := 1; cfg.failover && ctx.Err() == nil; attempt++ {
			if err = c.resume(ctx, c.f.addrs[(c.f.home(c.id)+attempt)%len(c.f.addrs)]); err != nil && attempt >= len(c.f.addrs)-1 {
				backoff := time.NewTimer(failoverBackoff/2 + rand.N(failoverBackoff/2))
				select {
				case <-ctx.Done():
				case <-backoff.C:
				}
				backoff.Stop()
			}
		}
		return err
	}
	st, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	return c.runSotW(st)
}

// resume opens a delta stream on addr, on a connection of its own, and
// runs it as a resumption: with what the client holds.
func (c *client) resume(ctx context.Context, addr string) error {
	cc, err := c.f.dial(addr)
	if err != nil {
		return err
	}
	defer cc.Close()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	c.resumed = true
	return c.runDelta(st)
}

// held returns the versions of what the client holds (vers: clusterVer or
// claVer) by name; nil without failover, or on a stream's first start.
func (c *client) held(vers []string) map[string]string {
	if !c.resumed {
		return nil
	}
	out := make(map[string]string)
	for i, v := range vers {
		if v != "" {
			out[clusterName(i)] = v
		}
	}
	return out
}

// keepVersions records the versions a delta response sends, and forgets
// those it removes, with failover.
func (c *client) keepVersions(resp *discovery.DeltaDiscoveryResponse) {
	if c.clusterVer == nil {
		return
	}
	vers := c.claVer
	if resp.GetTypeUrl() == clusterTypeURL {
		vers = c.clusterVer
	}
	for _, r := range resp.GetResources() {
		if i, err := clusterIndex(r.GetName(), len(vers)); err == nil && r.GetResource() != nil {
			vers[i] = r.GetVersion()
		}
	}
	for _, name := range resp.GetRemovedResources() {
		if i, err := clusterIndex(name, len(vers)); err == nil {
			vers[i] = ""
		}
	}
}

// sotwStream and deltaStream are an ADS stream of either client: grpc-go's
// generated streams and h2Stream.
type (
	sotwStream interface {
		Send(*discovery.DiscoveryRequest) error
		SendMsg(any) error // also takes an *edsRequest
		Recv() (*discovery.DiscoveryResponse, error)
	}
	deltaStream interface {
		Send(*discovery.DeltaDiscoveryRequest) error
		SendMsg(any) error // also takes a *deltaACK
		Recv() (*discovery.DeltaDiscoveryResponse, error)
	}
)

// stop ends every stream, waits for the clients and closes the connections.
func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
	for _, cc := range f.conns {
		_ = cc.Close()
	}
}

// fail records the first stream failure.
func (f *fleet) fail(err error) {
	select {
	case f.errc <- err:
	default:
	}
}

// startRound makes r the state clients are measured against. Call it before
// the change is made.
func (f *fleet) startRound(r *round) { f.cur.Store(r) }

// wait blocks until every client has reached r, a client failed, ctx is done
// or timeout passed.
func (f *fleet) wait(ctx context.Context, r *round, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.done:
		return nil
	case err := <-f.errc:
		f.fail(err) // keep it for later waits
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("timed out after %v: %d of %d clients do not hold generation %d yet",
			timeout, r.remaining.Load(), f.cfg.clients, r.gen)
	}
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// client is one Envoy-like ADS client. Its state is owned by its goroutine.
// It keeps, per cluster index, a hash of the bytes of the cluster and of the
// endpoint set it holds (0: none) and the endpoint set's generation, so
// that a resource sent again unchanged costs a hash, not a decode.
type client struct {
	f    *fleet
	id   int
	node *corev3.Node
	// With -repeat-node, repeatedNode is node, which every request sets,
	// and nodeBytes its encoding, for the requests the client encodes.
	repeatedNode *corev3.Node
	nodeBytes    []byte
	clusters     []uint64
	clas         []uint64
	markers      []int32
	// With failover, the versions of the clusters and endpoint sets held
	// (by index), for initial_resource_versions when resuming elsewhere;
	// resumed says the stream is such a resumption, and not yet answered.
	clusterVer, claVer []string
	resumed            bool
	nCluster           int // clusters held
	nCLA               int // endpoint sets held

	round *round // the round hits counts for
	hits  int    // changed endpoint sets of round seen at round.gen
}

// hashOf returns a non-zero hash of b.
func hashOf(b []byte) uint64 { return maphash.Bytes(hashSeed, b) | 1 }

// cluster records that the client holds cluster name with body b (nil:
// removed), and reports whether the set of clusters changed.
func (c *client) cluster(name string, b []byte) (bool, error) {
	i, err := clusterIndex(name, len(c.clusters))
	if err != nil {
		return false, err
	}
	was := c.clusters[i] != 0
	if b == nil {
		if was {
			c.clusters[i] = 0
			c.nCluster--
		}
		return was, nil
	}
	c.clusters[i] = hashOf(b)
	if !was {
		c.nCluster++
	}
	return !was, nil
}

// endpoints records that the client holds endpoint set name with body b
// (nil: removed) received at t.
func (c *client) endpoints(name string, b []byte, t time.Time) error {
	i, err := clusterIndex(name, len(c.clas))
	if err != nil {
		return err
	}
	if b == nil {
		if c.clas[i] != 0 {
			c.clas[i] = 0
			c.nCLA--
		}
		return nil
	}
	h := hashOf(b)
	if h == c.clas[i] {
		return nil // sent again, unchanged
	}
	gen, err := parseMarker(b)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if c.clas[i] == 0 {
		c.nCLA++
	}
	c.clas[i] = h
	c.markers[i] = gen
	if r := c.f.cur.Load(); r.changed != nil && r.changed[i] && gen == r.gen {
		if c.round != r {
			c.round, c.hits = r, 0
		}
		c.hits++
		if c.hits == r.k {
			r.complete(c.id, t)
		}
	}
	return nil
}

// checkInitial completes the initial round once the client holds every
// cluster and every endpoint set.
func (c *client) checkInitial(t time.Time) {
	r := c.f.cur.Load()
	if r.changed == nil && c.round != r && c.nCluster == len(c.clusters) && c.nCLA == len(c.clas) {
		c.round = r
		r.complete(c.id, t)
	}
}

// edsNames returns the names of the clusters held, in index order, reusing
// buf.
func (c *client) edsNames(buf []string) []string {
	buf = buf[:0]
	for i, h := range c.clusters {
		if h != 0 {
			buf = append(buf, clusterName(i))
		}
	}
	return buf
}

// runSotW runs a state-of-the-world ADS stream as Envoy does: a wildcard CDS
// request; on each CDS response, an EDS request naming every cluster if the
// set changed, then the CDS ACK; every EDS response ACKed with its version
// and nonce and the same names.
func (c *client) runSotW(st sotwStream) error {
	if err := st.Send(&discovery.DiscoveryRequest{Node: c.node, TypeUrl: clusterTypeURL}); err != nil {
		return err
	}
	var (
		names                []string // EDS subscription
		encoded              edsNames // names, encoded
		edsVersion, edsNonce string   // last EDS response
		seen                 = make([]bool, len(c.clusters))
	)
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		switch resp.GetTypeUrl() {
		case clusterTypeURL:
			// Full state: a cluster not in the response is removed.
			clear(seen)
			changed := false
			for _, a := range resp.GetResources() {
				name, err := resourceName(a)
				if err != nil {
					return err
				}
				ch, err := c.cluster(name, a.GetValue())
				if err != nil {
					return err
				}
				changed = changed || ch
				i, _ := clusterIndex(name, len(seen))
				seen[i] = true
			}
			for i, held := range c.clusters {
				if held != 0 && !seen[i] {
					if _, err := c.cluster(clusterName(i), nil); err != nil {
						return err
					}
					changed = true
				}
			}
			if changed {
				names = c.edsNames(names)
				encoded = encodeEDSNames(names)
				if err := st.SendMsg(&edsRequest{version: edsVersion, nonce: edsNonce, node: c.nodeBytes, names: encoded}); err != nil {
					return err
				}
			}
			if err := st.Send(&discovery.DiscoveryRequest{
				Node: c.repeatedNode, TypeUrl: clusterTypeURL, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(),
			}); err != nil {
				return err
			}
		case endpointTypeURL:
			for _, a := range resp.GetResources() {
				name, err := resourceName(a)
				if err != nil {
					return err
				}
				if err := c.endpoints(name, a.GetValue(), now); err != nil {
					return err
				}
			}
			edsVersion, edsNonce = resp.GetVersionInfo(), resp.GetNonce()
			if err := st.SendMsg(&edsRequest{version: edsVersion, nonce: edsNonce, node: c.nodeBytes, names: encoded}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected response type %q", resp.GetTypeUrl())
		}
		c.checkInitial(now)
	}
}

// resourceName returns the name of a Cluster or ClusterLoadAssignment.
func resourceName(a *anypb.Any) (string, error) {
	if a.GetTypeUrl() != clusterTypeURL && a.GetTypeUrl() != endpointTypeURL {
		return "", fmt.Errorf("unexpected resource type %q", a.GetTypeUrl())
	}
	return parseName(a.GetValue())
}

// runDelta runs an incremental ADS stream as Envoy does: a wildcard CDS
// subscription; on each CDS response, an EDS subscription to the clusters
// that are new (and an unsubscription of those removed), then the CDS ACK
// with the response's nonce; every EDS response ACKed with its nonce.
func (c *client) runDelta(st deltaStream) error {
	if err := st.Send(&discovery.DeltaDiscoveryRequest{Node: c.node, TypeUrl: clusterTypeURL,
		InitialResourceVersions: c.held(c.clusterVer)}); err != nil {
		return err
	}
	if c.resumed { // what it held of the endpoints, as Envoy asks for them again
		held := c.held(c.claVer)
		names := make([]string, 0, len(held))
		for n := range held {
			names = append(names, n)
		}
		if err := st.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: endpointTypeURL, ResourceNamesSubscribe: names,
			InitialResourceVersions: held}); err != nil {
			return err
		}
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		if c.resumed {
			c.resumed = false
			if r := c.f.resumed.Load(); r != nil {
				r.complete(c.id, now)
			}
		}
		c.keepVersions(resp)
		switch resp.GetTypeUrl() {
		case clusterTypeURL:
			var sub, unsub []string // not kept: they hold the response's strings
			for _, r := range resp.GetResources() {
				if r.GetResource() == nil {
					continue // a name-only answer: not a cluster
				}
				if r.GetResource().GetTypeUrl() != clusterTypeURL {
					return fmt.Errorf("unexpected resource type %q", r.GetResource().GetTypeUrl())
				}
				added, err := c.cluster(r.GetName(), r.GetResource().GetValue())
				if err != nil {
					return err
				}
				if added {
					sub = append(sub, r.GetName())
				}
			}
			for _, name := range resp.GetRemovedResources() {
				removed, err := c.cluster(name, nil)
				if err != nil {
					return err
				}
				if removed {
					unsub = append(unsub, name)
				}
			}
			if len(sub) > 0 || len(unsub) > 0 {
				if err := st.Send(&discovery.DeltaDiscoveryRequest{
					Node: c.repeatedNode, TypeUrl: endpointTypeURL, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub,
				}); err != nil {
					return err
				}
			}
			if err := st.SendMsg(&deltaACK{node: c.nodeBytes, typeURL: clusterTypeURL, nonce: resp.GetNonce()}); err != nil {
				return err
			}
		case endpointTypeURL:
			for _, r := range resp.GetResources() {
				if r.GetResource() == nil {
					continue // the server does not have it (yet)
				}
				if r.GetResource().GetTypeUrl() != endpointTypeURL {
					return fmt.Errorf("unexpected resource type %q", r.GetResource().GetTypeUrl())
				}
				if err := c.endpoints(r.GetName(), r.GetResource().GetValue(), now); err != nil {
					return err
				}
			}
			for _, name := range resp.GetRemovedResources() {
				if err := c.endpoints(name, nil, now); err != nil {
					return err
				}
			}
			if err := st.SendMsg(&deltaACK{node: c.nodeBytes, typeURL: endpointTypeURL, nonce: resp.GetNonce()}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected response type %q", resp.GetTypeUrl())
		}
		c.checkInitial(now)
	}
}
