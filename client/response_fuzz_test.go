package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/client/transport"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// sentinelNonce is the nonce of the response a fuzzTransport sends after
// the fuzzed one: its ACK shows the fuzzed one has been handled.
const sentinelNonce = "sentinel"

// fuzzTransport is a fake at the transport boundary: its first stream
// answers the client's subscriptions with one given response, then a
// sentinel response; it records every request.
type fuzzTransport struct {
	delta bool
	resp  []byte // the fuzzed response
	done  chan struct{}

	mu       sync.Mutex // guards the fields below
	streams  int
	sent     []proto.Message // requests of the first stream
	finished bool
}

func (ft *fuzzTransport) Build(string) (transport.Transport, error) { return ft, nil }
func (ft *fuzzTransport) Close() error                              { return nil }

func (ft *fuzzTransport) finish() {
	if !ft.finished {
		ft.finished = true
		close(ft.done)
	}
}

func (ft *fuzzTransport) NewStream(ctx context.Context, _ string) (transport.Stream, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.streams++
	if ft.streams > 1 {
		// The fuzzed response ended the first stream.
		ft.finish()
	}
	return &fuzzStream{ft: ft, ctx: ctx, first: ft.streams == 1, ready: make(chan struct{}), types: map[string]bool{}}, nil
}

type fuzzStream struct {
	ft    *fuzzTransport
	ctx   context.Context
	first bool
	ready chan struct{} // closed when both types are subscribed

	mu    sync.Mutex // guards types and recvs
	types map[string]bool
	recvs int
}

func (s *fuzzStream) Send(b []byte) error {
	var req interface {
		proto.Message
		GetTypeUrl() string
		GetResponseNonce() string
	}
	if s.ft.delta {
		req = new(discovery.DeltaDiscoveryRequest)
	} else {
		req = new(discovery.DiscoveryRequest)
	}
	if err := proto.Unmarshal(b, req); err != nil {
		panic(err) // the client's own requests always decode
	}
	if !s.first {
		return nil
	}
	s.ft.mu.Lock()
	s.ft.sent = append(s.ft.sent, req)
	if req.GetResponseNonce() == sentinelNonce {
		s.ft.finish()
	}
	s.ft.mu.Unlock()
	s.mu.Lock()
	s.types[req.GetTypeUrl()] = true
	if len(s.types) == 2 && !isClosed(s.ready) {
		close(s.ready)
	}
	s.mu.Unlock()
	return nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (s *fuzzStream) Recv() ([]byte, error) {
	if s.first {
		select {
		case <-s.ready:
		case <-s.ctx.Done():
			return nil, s.ctx.Err()
		}
		s.mu.Lock()
		n := s.recvs
		s.recvs++
		s.mu.Unlock()
		switch n {
		case 0:
			return s.ft.resp, nil
		case 1:
			return sentinel(s.ft.delta), nil
		}
	}
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}

// sentinel returns an empty EDS response with the sentinel nonce.
func sentinel(delta bool) []byte {
	var m proto.Message = &discovery.DiscoveryResponse{TypeUrl: eds, VersionInfo: "sentinel", Nonce: sentinelNonce}
	if delta {
		m = &discovery.DeltaDiscoveryResponse{TypeUrl: eds, SystemVersionInfo: "sentinel", Nonce: sentinelNonce}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// fuzzSeeds returns responses for the corpus: valid, duplicated (C2),
// rejected by Validate (C1), wrapped with a TTL, heartbeats, of the wrong
// type.
func fuzzSeeds() (sotw, delta [][]byte) {
	cl, ea, ea2 := rawxds.Cluster("a").Body, rawxds.Endpoints("a", 1).Body, rawxds.Endpoints("a", 2).Body
	wrap := func(name string, body *anypb.Any) *anypb.Any {
		a, err := anypb.New(&discovery.Resource{Name: name, Resource: body, Ttl: durationpb.New(time.Minute)})
		if err != nil {
			panic(err)
		}
		return a
	}
	for _, r := range []*discovery.DiscoveryResponse{
		{TypeUrl: cds, VersionInfo: "1", Nonce: "n1", Resources: []*anypb.Any{cl}},
		{TypeUrl: eds, VersionInfo: "1", Nonce: "n1", Resources: []*anypb.Any{ea}},
		{TypeUrl: eds, VersionInfo: "2", Nonce: "n2", Resources: []*anypb.Any{ea, ea}},
		{TypeUrl: eds, VersionInfo: "2", Nonce: "n3", Resources: []*anypb.Any{ea2}},
		{TypeUrl: eds, VersionInfo: "3", Nonce: "n4", Resources: []*anypb.Any{wrap("a", ea), wrap("b", nil)}},
		{TypeUrl: eds, VersionInfo: "3", Nonce: "n5", Resources: []*anypb.Any{cl}},
		{TypeUrl: cds, VersionInfo: "4", Nonce: "", Resources: []*anypb.Any{wrap("x", cl)}},
	} {
		b, _ := proto.Marshal(r)
		sotw = append(sotw, b)
	}
	for _, r := range []*discovery.DeltaDiscoveryResponse{
		{TypeUrl: cds, Nonce: "d1", Resources: []*discovery.Resource{{Name: "a", Version: "1", Resource: cl}}},
		{TypeUrl: eds, Nonce: "d2", Resources: []*discovery.Resource{{Name: "a", Version: "1", Resource: ea}, {Name: "a", Version: "2", Resource: ea}}},
		{TypeUrl: eds, Nonce: "d3", Resources: []*discovery.Resource{{Name: "a", Version: "2", Resource: ea2}}},
		{TypeUrl: eds, Nonce: "d4", Resources: []*discovery.Resource{{Name: "a", Aliases: []string{"b"}, Ttl: durationpb.New(time.Minute)}}, RemovedResources: []string{"c", "c"}},
		{TypeUrl: cds, Nonce: "d5", RemovedResources: []string{"a"}, Resources: []*discovery.Resource{{Name: "b", Resource: ea}}},
	} {
		b, _ := proto.Marshal(r)
		delta = append(delta, b)
	}
	return sotw, delta
}

// FuzzResponse feeds arbitrary bytes to the client as a response, SotW or
// delta, at the transport boundary: the client must not panic, and every
// NACK it sends must carry the nonce of the response it rejects (C1).
func FuzzResponse(f *testing.F) {
	sotw, delta := fuzzSeeds()
	for _, b := range sotw {
		f.Add(b, false)
	}
	for _, b := range delta {
		f.Add(b, true)
	}
	f.Add([]byte{0xff, 0x01}, false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, msg []byte, delta bool) {
		ft := &fuzzTransport{delta: delta, resp: msg, done: make(chan struct{})}
		c, err := client.New(client.Config{
			Transport: ft,
			ADS:       true,
			Delta:     delta,
			Validate:  clienttest.RejectPort(2),
			Backoff:   func(int) time.Duration { return 0 },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r := clienttest.NewRecorder()
		defer c.Watch(cds, "*", r)()
		defer c.Watch(eds, "a", r)()
		select {
		case <-ft.done:
		case <-time.After(clienttest.Timeout):
			t.Fatalf("the client neither answered the sentinel nor reconnected within %v", clienttest.Timeout)
		}

		// The nonce of the fuzzed response, if it decodes at all.
		nonce, decoded := "", false
		if delta {
			var m discovery.DeltaDiscoveryResponse
			if proto.Unmarshal(msg, &m) == nil {
				nonce, decoded = m.GetNonce(), true
			}
		} else {
			var m discovery.DiscoveryResponse
			if proto.Unmarshal(msg, &m) == nil {
				nonce, decoded = m.GetNonce(), true
			}
		}
		ft.mu.Lock()
		defer ft.mu.Unlock()
		for _, req := range ft.sent {
			var nack bool
			var got string
			switch r := req.(type) {
			case *discovery.DiscoveryRequest:
				nack, got = r.GetErrorDetail() != nil, r.GetResponseNonce()
			case *discovery.DeltaDiscoveryRequest:
				nack, got = r.GetErrorDetail() != nil, r.GetResponseNonce()
			}
			if !nack {
				continue
			}
			if !decoded || got != nonce {
				t.Fatalf("NACK %v carries nonce %q, want %q of the rejected response", req, got, nonce)
			}
		}
	})
}
