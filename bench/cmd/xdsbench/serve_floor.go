package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// serveFloor is `xdsbench serve-floor`: the least any grpc-go xDS server
// can do for this scenario, so that its RSS and CPU are the floor set by
// grpc-go itself. It serves exactly the bench's content, keeps per stream
// only the endpoint sets subscribed to (and, SotW, a hash of the names last
// requested), reads requests from their wire format, sends responses that
// many streams share as one grpc.PreparedMsg encoded once, and has no
// goroutine per stream besides its handler.
func serveFloor(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve-floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf serveFlags
	sf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	s, err := newFloor(sf.clusters, sf.endpoints)
	if err != nil {
		fmt.Fprintln(stderr, "xdsbench:", err)
		return 1
	}
	return serveUnderTest(sf, grpcGoServer(), func(gs grpc.ServiceRegistrar) { discovery.RegisterAggregatedDiscoveryServiceServer(gs, s) }, s.change, stderr)
}

// adsMode is an ADS variant; it indexes the per-variant responses.
type adsMode int

const (
	modeSotW adsMode = iota
	modeDelta
)

// floor is the floor server: all clusters, and every endpoint set at its
// latest generation, each encoded once.
type floor struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	endpoints int
	cds       [2]*shared // every cluster, by mode; never changes

	mu      sync.Mutex
	eds     []*discovery.Resource // endpoint set i as last encoded
	version string                // the generation of the last change
	all     [2]*shared            // every endpoint set now, by mode; built when first asked for
	streams map[*floorStream]struct{}
}

// floorStream is one ADS stream of the floor server.
type floorStream struct {
	mu     sync.Mutex // held while sending, and from a subscription's snapshot to its response
	ss     grpc.ServerStream
	mode   adsMode
	closed bool     // the handler returned: no more sends; guarded by mu
	subs   []uint64 // endpoint sets subscribed to, a bit per index; guarded by floor.mu
}

// shared is a response that many streams send as it is: encoded once, by
// the first stream that sends it, into a grpc.PreparedMsg. That encoding is
// valid on every stream because they share the codec and none compresses
// (the clients do not ask for it).
type shared struct {
	msg  proto.Message
	once sync.Once
	pm   *grpc.PreparedMsg
	err  error
}

// newFloor encodes the initial content.
func newFloor(clusters, endpoints int) (*floor, error) {
	s := &floor{endpoints: endpoints, version: "0", eds: make([]*discovery.Resource, clusters),
		streams: make(map[*floorStream]struct{})}
	cds := make([]*discovery.Resource, clusters)
	for i := range clusters {
		c, err := anypb.New(newCluster(i))
		if err != nil {
			return nil, err
		}
		e, err := anypb.New(newCLA(i, endpoints, 0))
		if err != nil {
			return nil, err
		}
		cds[i] = &discovery.Resource{Name: clusterName(i), Version: "0", Resource: c}
		s.eds[i] = &discovery.Resource{Name: clusterName(i), Version: "0", Resource: e}
	}
	for m := range s.cds {
		s.cds[m] = &shared{msg: response(adsMode(m), clusterTypeURL, "0", cds)}
	}
	return s, nil
}

// response returns the response of mode m carrying rs (not kept). Its
// version (of the type) is also its nonce: the clients echo both back, and
// the server only looks at whether a request carries a nonce.
func response(m adsMode, typeURL, version string, rs []*discovery.Resource) proto.Message {
	if m == modeDelta {
		return &discovery.DeltaDiscoveryResponse{SystemVersionInfo: version, TypeUrl: typeURL, Nonce: version,
			Resources: slices.Clone(rs)}
	}
	anys := make([]*anypb.Any, len(rs))
	for i, r := range rs {
		anys[i] = r.Resource
	}
	return &discovery.DiscoveryResponse{VersionInfo: version, TypeUrl: typeURL, Nonce: version, Resources: anys}
}

// send sends m, a message or a *shared, on st.
func (st *floorStream) send(m any) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sendLocked(m)
}

// sendLocked is send with st.mu held.
func (st *floorStream) sendLocked(m any) error {
	if st.closed {
		return nil // gRPC forbids SendMsg once the handler returned
	}
	if sh, ok := m.(*shared); ok {
		sh.once.Do(func() {
			sh.pm = new(grpc.PreparedMsg)
			sh.err = sh.pm.Encode(st.ss, sh.msg)
		})
		if sh.err != nil {
			return sh.err
		}
		m = sh.pm
	}
	return st.ss.SendMsg(m)
}

// subscribed reports whether st subscribed to endpoint set i. Call it with
// floor.mu held.
func (st *floorStream) subscribed(i int) bool {
	return i/64 < len(st.subs) && st.subs[i/64]&(1<<(i%64)) != 0
}

// open registers a new stream.
func (s *floor) open(ss grpc.ServerStream, m adsMode) *floorStream {
	st := &floorStream{ss: ss, mode: m}
	s.mu.Lock()
	s.streams[st] = struct{}{}
	s.mu.Unlock()
	return st
}

// close forgets a stream whose handler returns, and stops the sends of a
// change under way.
func (s *floor) close(st *floorStream) {
	s.mu.Lock()
	delete(s.streams, st)
	s.mu.Unlock()
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
}

// subscribe applies an endpoint request of st (raw: its wire format):
// fields sub name endpoint sets to subscribe to (SotW with replace: the new
// subscription), fields unsub (delta; 0: none) sets to unsubscribe from. It sends the
// sets named in sub as they are now, before any change made after.
func (s *floor) subscribe(st *floorStream, raw []byte, sub, unsub fieldNum, replace bool) error {
	st.mu.Lock() // a change's fan-out waits, so it cannot overtake this response
	defer st.mu.Unlock()
	s.mu.Lock()
	n := len(s.eds)
	want := make([]uint64, (n+63)/64)
	if st.subs == nil || replace {
		st.subs = make([]uint64, len(want))
	}
	sc := fieldScanner{b: raw}
	for num, v, ok := sc.next(); ok; num, v, ok = sc.next() {
		if num != sub && num != unsub {
			continue
		}
		i, err := clusterIndex(string(v), n)
		if err != nil {
			continue // not served: nothing to send
		}
		if num == sub {
			want[i/64] |= 1 << (i % 64)
			st.subs[i/64] |= 1 << (i % 64)
		} else {
			st.subs[i/64] &^= 1 << (i % 64)
		}
	}
	var rs []*discovery.Resource
	for i := range n {
		if want[i/64]&(1<<(i%64)) != 0 {
			rs = append(rs, s.eds[i])
		}
	}
	var m any
	switch {
	case len(rs) == n:
		if s.all[st.mode] == nil {
			s.all[st.mode] = &shared{msg: response(st.mode, endpointTypeURL, s.version, s.eds)}
		}
		m = s.all[st.mode]
	case len(rs) > 0:
		m = response(st.mode, endpointTypeURL, s.version, rs)
	}
	s.mu.Unlock()
	if sc.err != nil {
		return sc.err
	}
	if m == nil {
		return nil
	}
	return st.sendLocked(m)
}

// push is one response of a change to one stream.
type push struct {
	st *floorStream
	m  any
}

// change encodes generation gen of the endpoint sets idx and sends them to
// every stream subscribed to any of them: one response shared by the
// streams subscribed to all of them, else one of their own. It returns once
// every response is sent (queued by gRPC).
func (s *floor) change(gen int, idx []int) error {
	version := strconv.Itoa(gen)
	rs := make([]*discovery.Resource, len(idx))
	for j, i := range idx {
		a, err := anypb.New(newCLA(i, s.endpoints, gen))
		if err != nil {
			return err
		}
		rs[j] = &discovery.Resource{Name: clusterName(i), Version: version, Resource: a}
	}
	var upd [2]*shared
	for m := range upd {
		upd[m] = &shared{msg: response(adsMode(m), endpointTypeURL, version, rs)}
	}
	s.mu.Lock()
	s.version = version
	for j, i := range idx {
		s.eds[i] = rs[j]
	}
	s.all = [2]*shared{}
	work := make([]push, 0, len(s.streams))
	var mine []*discovery.Resource
	for st := range s.streams {
		mine = mine[:0]
		for j, i := range idx {
			if st.subscribed(i) {
				mine = append(mine, rs[j])
			}
		}
		switch len(mine) {
		case 0:
		case len(rs):
			work = append(work, push{st, upd[st.mode]})
		default:
			work = append(work, push{st, response(st.mode, endpointTypeURL, version, mine)})
		}
	}
	s.mu.Unlock()

	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(work), 4*runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for j := next.Add(1) - 1; j < int64(len(work)); j = next.Add(1) - 1 {
				_ = work[j].st.send(work[j].m) // a failed stream ends: its handler sees it
			}
		})
	}
	wg.Wait()
	return nil
}
