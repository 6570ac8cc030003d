// Package bench measures how fast an xDS management server fans a change of
// one resource out to many subscribed ADS streams.
//
// # Peer
//
// A server under test is plugged in as a Peer:
//
//	type Peer interface {
//		Register(s *grpc.Server)
//		Publish(version int) error
//		Close()
//	}
//
// Register installs the server's AggregatedDiscoveryService on s. It is
// called once, before s serves.
//
// Publish makes the server's ClusterLoadAssignment named ClusterName equal
// to NewCLA(ClusterName, version) and lets every stream subscribed to it know.
// It may return before the change has reached any stream: delivery is what the
// harness measures. Run calls Publish(0) once before opening any stream (the
// initial state), then Publish(1), Publish(2), ... one round at a time, from a
// single goroutine. The peer may serve other endpoint resources besides
// ClusterName (see ResourceName), but those must not change.
//
// Close releases everything the peer holds (goroutines, contexts). Run calls
// it exactly once, after the gRPC server has stopped. Run owns the peer from
// the moment it is passed in, also when Run fails.
//
// # What is measured
//
// Run starts a real grpc.Server on 127.0.0.1:0 and opens n ADS streams spread
// over ceil(n/Config.StreamsPerConn) client connections. Each stream sends the
// node NodeID(i) (cluster NodeCluster), subscribes to EDS for ClusterName
// only, and ACKs every response; a goroutine per stream reads the responses,
// decodes the ClusterLoadAssignment and compares its version marker (see
// VersionOf) to the round in flight. One benchmark iteration is one round:
// Publish(v), then wait until all n streams have received content v. The
// ns/op figure is therefore the time to publish one change to all n streams;
// the custom metric ns/stream divides it by n. Both include the client side
// (decoding and ACKing on the same 2-core machine, about a third of the CPU
// time), so they compare servers rather than measure one in isolation.
//
// The client's goroutines share the server's heap and garbage collector:
// every GC cycle scans their stacks too, and a cycle costs a round tens of
// milliseconds. Rounds are therefore uneven; use enough of them (-benchtime
// 20x or more, -count) and compare with GOGC=off to see the cost without
// GC.
//
// # Running
//
//	cd bench && go test -run '^$' -bench . -benchtime 20x
//
// Benchmarks are named Fanout/<server>/<sotw|delta>/streams=<n>. The test
// flags -others (unchanging endpoint resources served besides ClusterName,
// default 0) and -streams-per-conn (default 100) apply to all of them. To
// add a server, implement Peer and add it to targets in fanout_test.go.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Peer is an xDS management server under test. See the package
// documentation for the contract of each method.
type Peer interface {
	// Register installs the AggregatedDiscoveryService on s.
	Register(s *grpc.Server)
	// Publish sets ClusterName to NewCLA(ClusterName, version).
	Publish(version int) error
	// Close releases the peer; Run calls it after the gRPC server stopped.
	Close()
}

// EndpointTypeURL is the type URL of ClusterLoadAssignment, the one type the
// streams subscribe to.
const EndpointTypeURL = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"

// ClusterName is the name of the one ClusterLoadAssignment that every stream
// subscribes to and that Publish changes.
const ClusterName = "cla-0"

// NodeCluster is the cluster of every stream's node; a server may use it to
// put all streams in one group.
const NodeCluster = "fanout"

// ResourceName returns the name of the i-th endpoint resource: "cla-0" for
// i == 0 (ClusterName) and "cla-1", "cla-2", ... for resources that a peer
// may serve besides it.
func ResourceName(i int) string { return fmt.Sprintf("cla-%d", i) }

// NodeID returns the node id sent by the i-th stream.
func NodeID(i int) string { return fmt.Sprintf("node-%d", i) }

// NewCLA returns the content of the ClusterLoadAssignment called name at the
// given version (version >= 0): one locality with one endpoint whose load
// balancing weight is version+1 (the marker read by VersionOf) and whose port
// also changes with the version.
func NewCLA(name string, version int) *endpoint.ClusterLoadAssignment {
	return &endpoint.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpoint.LocalityLbEndpoints{{
			Locality: &core.Locality{Region: "bench", Zone: "a"},
			LbEndpoints: []*endpoint.LbEndpoint{{
				HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
					Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
						Protocol:      core.SocketAddress_TCP,
						Address:       "127.0.0.2",
						PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(1024 + version%60000)},
					}}},
				}},
				LoadBalancingWeight: wrapperspb.UInt32(uint32(version) + 1),
			}},
		}},
	}
}

// VersionOf returns the version that NewCLA encoded in cla, and false if cla
// carries no marker.
func VersionOf(cla *endpoint.ClusterLoadAssignment) (int, bool) {
	eps := cla.GetEndpoints()
	if len(eps) == 0 || len(eps[0].GetLbEndpoints()) == 0 {
		return 0, false
	}
	w := eps[0].GetLbEndpoints()[0].GetLoadBalancingWeight()
	if w == nil || w.GetValue() == 0 {
		return 0, false
	}
	return int(w.GetValue()) - 1, true
}

// Config tunes Run. The zero value of a field selects its default.
type Config struct {
	// StreamsPerConn is the number of streams multiplexed on one client
	// connection (default 100). Each connection costs two file descriptors
	// in this process (client and server side).
	StreamsPerConn int
	// RoundTimeout bounds the wait for one round (the initial sync or one
	// publish) to reach every stream (default 2 minutes). It is a watchdog
	// that fails the benchmark, not part of the synchronisation.
	RoundTimeout time.Duration
}

// DefaultConfig is the Config used by Run.
var DefaultConfig = Config{StreamsPerConn: 100, RoundTimeout: 2 * time.Minute}

// Run benchmarks peer with n streams, using DefaultConfig. Streams use
// StreamAggregatedResources (state of the world), or DeltaAggregatedResources
// when delta is true. Run takes ownership of peer.
func Run(b *testing.B, peer Peer, n int, delta bool) {
	DefaultConfig.Run(b, peer, n, delta)
}

// Run benchmarks peer with n streams as described in the package
// documentation. Run takes ownership of peer.
func (c Config) Run(b *testing.B, peer Peer, n int, delta bool) {
	b.Helper()
	if c.StreamsPerConn <= 0 {
		c.StreamsPerConn = DefaultConfig.StreamsPerConn
	}
	if c.RoundTimeout <= 0 {
		c.RoundTimeout = DefaultConfig.RoundTimeout
	}
	if n <= 0 {
		peer.Close()
		b.Fatalf("bench: n = %d, want > 0", n)
	}

	// Deferred calls run in reverse order, also after b.Fatal: streams and
	// connections first, then the server, then the peer.
	defer peer.Close()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("bench: listen: %v", err)
	}
	srv := grpc.NewServer(
		grpc.MaxConcurrentStreams(math.MaxUint32),
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(connWindowSize),
	)
	peer.Register(srv)
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		_ = srv.Serve(lis) // returns nil after Stop
	}()
	defer func() {
		srv.Stop()
		<-serveDone
	}()

	f := &fanout{n: n, errc: make(chan error, 1)}
	initial := f.startRound(0)
	if err := peer.Publish(0); err != nil {
		b.Fatalf("bench: initial Publish(0): %v", err)
	}

	conns, err := dial(lis.Addr().String(), (n+c.StreamsPerConn-1)/c.StreamsPerConn)
	defer func() {
		for _, cc := range conns {
			_ = cc.Close()
		}
	}()
	if err != nil {
		b.Fatalf("bench: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := range n {
		client := discovery.NewAggregatedDiscoveryServiceClient(conns[i%len(conns)])
		wg.Go(func() {
			var err error
			if delta {
				err = f.runDelta(ctx, client, NodeID(i))
			} else {
				err = f.runSotW(ctx, client, NodeID(i))
			}
			if err != nil && ctx.Err() == nil {
				f.fail(fmt.Errorf("stream %d: %w", i, err))
			}
		})
	}
	if err := f.wait(initial, c.RoundTimeout); err != nil {
		b.Fatalf("bench: initial sync of %d streams: %v", n, err)
	}
	// Start the timed rounds without the garbage of the setup.
	runtime.GC()

	version := 0
	for b.Loop() {
		version++
		r := f.startRound(version)
		if err := peer.Publish(version); err != nil {
			b.Fatalf("bench: Publish(%d): %v", version, err)
		}
		if err := f.wait(r, c.RoundTimeout); err != nil {
			b.Fatalf("bench: round %d: %v", version, err)
		}
	}
	if version > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(version)/float64(n), "ns/stream")
	}
}

// Flow-control windows: large enough that neither a stream nor a connection
// carrying StreamsPerConn streams waits for a window update within a round.
const (
	windowSize     = 1 << 20
	connWindowSize = 64 << 20
)

// dial opens count client connections to addr. On error it returns the
// connections opened so far, for the caller to close.
func dial(addr string, count int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, count)
	for range count {
		cc, err := grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(windowSize),
			grpc.WithInitialConnWindowSize(connWindowSize),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
		)
		if err != nil {
			return conns, fmt.Errorf("dial %s: %w", addr, err)
		}
		conns = append(conns, cc)
	}
	return conns, nil
}

// fanout tracks which streams have received the content of the current
// round.
type fanout struct {
	n    int
	cur  atomic.Pointer[round]
	errc chan error // first stream failure
}

// round is one publish being waited for.
type round struct {
	version   int
	remaining atomic.Int64
	done      chan struct{} // closed when remaining reaches 0
}

// startRound makes version the content that streams are counted for. It must
// be called before the content is published, so that no stream can see it
// first.
func (f *fanout) startRound(version int) *round {
	r := &round{version: version, done: make(chan struct{})}
	r.remaining.Store(int64(f.n))
	f.cur.Store(r)
	return r
}

// wait blocks until all streams have received r's content, a stream failed,
// or timeout passed.
func (f *fanout) wait(r *round, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.done:
		return nil
	case err := <-f.errc:
		return err
	case <-t.C:
		return fmt.Errorf("timed out after %v: %d of %d streams have not received version %d",
			timeout, r.remaining.Load(), f.n, r.version)
	}
}

// fail records the first stream failure.
func (f *fanout) fail(err error) {
	select {
	case f.errc <- err:
	default:
	}
}

// received notes that a stream, which last counted version *last, now has
// content at version v.
func (f *fanout) received(last *int, v int) {
	if v <= *last {
		return // duplicate or stale response
	}
	*last = v
	if r := f.cur.Load(); r.version == v && r.remaining.Add(-1) == 0 {
		close(r.done)
	}
}

// decodeCLA returns the version marker of a resource if it is ClusterName.
func decodeCLA(a *anypb.Any) (int, bool, error) {
	var cla endpoint.ClusterLoadAssignment
	if err := a.UnmarshalTo(&cla); err != nil {
		return 0, false, fmt.Errorf("decode %s: %w", a.GetTypeUrl(), err)
	}
	if cla.GetClusterName() != ClusterName {
		return 0, false, nil
	}
	v, ok := VersionOf(&cla)
	return v, ok, nil
}

// runSotW runs one state-of-the-world ADS stream until ctx is done or the
// stream fails.
func (f *fanout) runSotW(ctx context.Context, client discovery.AggregatedDiscoveryServiceClient, node string) error {
	st, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	names := []string{ClusterName}
	if err := st.Send(&discovery.DiscoveryRequest{
		Node:          &core.Node{Id: node, Cluster: NodeCluster},
		TypeUrl:       EndpointTypeURL,
		ResourceNames: names,
	}); err != nil {
		return err
	}
	last := -1
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		if resp.GetTypeUrl() != EndpointTypeURL {
			return fmt.Errorf("unexpected response type %q", resp.GetTypeUrl())
		}
		if err := st.Send(&discovery.DiscoveryRequest{
			TypeUrl:       EndpointTypeURL,
			ResourceNames: names,
			VersionInfo:   resp.GetVersionInfo(),
			ResponseNonce: resp.GetNonce(),
		}); err != nil {
			return err
		}
		for _, a := range resp.GetResources() {
			v, ok, err := decodeCLA(a)
			if err != nil {
				return err
			}
			if ok {
				f.received(&last, v)
			}
		}
	}
}

// runDelta runs one delta ADS stream until ctx is done or the stream fails.
func (f *fanout) runDelta(ctx context.Context, client discovery.AggregatedDiscoveryServiceClient, node string) error {
	st, err := client.DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&discovery.DeltaDiscoveryRequest{
		Node:                   &core.Node{Id: node, Cluster: NodeCluster},
		TypeUrl:                EndpointTypeURL,
		ResourceNamesSubscribe: []string{ClusterName},
	}); err != nil {
		return err
	}
	last := -1
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		if resp.GetTypeUrl() != EndpointTypeURL {
			return fmt.Errorf("unexpected response type %q", resp.GetTypeUrl())
		}
		if err := st.Send(&discovery.DeltaDiscoveryRequest{
			TypeUrl:       EndpointTypeURL,
			ResponseNonce: resp.GetNonce(),
		}); err != nil {
			return err
		}
		for _, r := range resp.GetResources() {
			if r.GetName() != ClusterName {
				continue
			}
			if r.GetResource() == nil {
				return errors.New("delta resource without a body")
			}
			v, ok, err := decodeCLA(r.GetResource())
			if err != nil {
				return err
			}
			if ok {
				f.received(&last, v)
			}
		}
	}
}
