package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/client/grpctransport"
	"github.com/xdsd/xdsd/client/transport"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// timeout bounds every wait for something the test expects.
const timeout = 10 * time.Second

const (
	lds = resource.ListenerType
	rds = resource.RouteType
	cds = resource.ClusterType
	eds = resource.EndpointType
)

// variant is one way of talking xDS.
type variant struct {
	name       string
	ads, delta bool
}

var variants = []variant{
	{"sotw_ads", true, false},
	{"sotw_per_type", false, false},
	{"delta_ads", true, true},
	{"delta_per_type", false, true},
}

func forEachVariant(t *testing.T, f func(t *testing.T, v variant)) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) { f(t, v) })
	}
}

// startServer runs xdsd's server on loopback.
func startServer(t *testing.T) *rawxds.Env {
	return rawxds.Start(t, cache.New(nil), server.Config{})
}

func publish(env *rawxds.Env, rs ...*resource.Resource) {
	env.Cache.SetSnapshot("", cache.MustSnapshot(rs...))
}

var dialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}

// newClient returns a client of addr for v, closed when the test ends.
// edit changes the configuration before New.
func newClient(t *testing.T, addr string, v variant, edit func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{
		Node:        rawxds.Node("test-" + v.name),
		Server:      addr,
		DialOptions: dialOptions,
		ADS:         v.ads,
		Delta:       v.delta,
		Backoff:     func(int) time.Duration { return 10 * time.Millisecond },
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// event is one watcher callback.
type event struct {
	kind   string // "update", "error" or "dne"
	name   string
	update client.Update
	err    error
}

// recorder is a Watcher that records its callbacks in order.
type recorder struct{ ch chan event }

func newRecorder() *recorder { return &recorder{ch: make(chan event, 10000)} }

func (r *recorder) OnUpdate(u client.Update) { r.ch <- event{kind: "update", name: u.Name, update: u} }
func (r *recorder) OnError(err error)        { r.ch <- event{kind: "error", err: err} }
func (r *recorder) OnDoesNotExist(n string)  { r.ch <- event{kind: "dne", name: n} }

// waitFor returns the first event that match accepts, skipping others.
func (r *recorder) waitFor(t *testing.T, what string, match func(event) bool) event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e := <-r.ch:
			if match(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s within %v", what, timeout)
		}
	}
}

// next returns the next event that is not an error.
func (r *recorder) next(t *testing.T) event {
	t.Helper()
	return r.waitFor(t, "event", func(e event) bool { return e.kind != "error" })
}

// noneYet fails if an event other than an error has been recorded.
func (r *recorder) noneYet(t *testing.T) {
	t.Helper()
	for {
		select {
		case e := <-r.ch:
			if e.kind != "error" {
				t.Fatalf("unexpected %s %q", e.kind, e.name)
			}
		default:
			return
		}
	}
}

func (r *recorder) wantUpdate(t *testing.T, name string) client.Update {
	t.Helper()
	e := r.next(t)
	if e.kind != "update" || e.name != name {
		t.Fatalf("got %s %q (%v), want update %q", e.kind, e.name, e.err, name)
	}
	return e.update
}

func (r *recorder) wantDNE(t *testing.T, name string) {
	t.Helper()
	e := r.next(t)
	if e.kind != "dne" || e.name != name {
		t.Fatalf("got %s %q, want does-not-exist %q", e.kind, e.name, name)
	}
}

// port returns the port of the first endpoint of a ClusterLoadAssignment,
// 0 if it has none (the fuzz target sends such ones too).
func port(u client.Update) uint32 {
	cla, _ := u.Message.(*endpointv3.ClusterLoadAssignment)
	eps := cla.GetEndpoints()
	if len(eps) == 0 || len(eps[0].GetLbEndpoints()) == 0 {
		return 0
	}
	return eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within %v", what, timeout)
		}
	}
}

// tap is a transport.Builder around the gRPC transport that records
// every message and lets a test break streams and refuse new ones: the
// test double at the transport boundary.
type tap struct {
	mu      sync.Mutex // guards the fields below
	streams []*tapStream
	refuse  bool
	log     []wire
}

// wire is one message on a tapped stream.
type wire struct {
	stream int
	sent   bool // a request; false: a response
	msg    proto.Message
}

type tapStream struct {
	inner  transport.Stream
	cancel context.CancelFunc
	t      *tap
	index  int
	delta  bool
}

type tapTransport struct {
	t     *tap
	inner transport.Transport
}

func (tp *tap) Build(server string) (transport.Transport, error) {
	inner, err := grpctransport.Builder{DialOptions: dialOptions}.Build(server)
	if err != nil {
		return nil, err
	}
	return &tapTransport{t: tp, inner: inner}, nil
}

func (tt *tapTransport) NewStream(ctx context.Context, method string) (transport.Stream, error) {
	tt.t.mu.Lock()
	refuse := tt.t.refuse
	tt.t.mu.Unlock()
	if refuse {
		return nil, errors.New("tap: refused")
	}
	ctx, cancel := context.WithCancel(ctx)
	s, err := tt.inner.NewStream(ctx, method)
	if err != nil {
		cancel()
		return nil, err
	}
	tt.t.mu.Lock()
	defer tt.t.mu.Unlock()
	ts := &tapStream{inner: s, cancel: cancel, t: tt.t, index: len(tt.t.streams), delta: strings.Contains(method, "/Delta")}
	tt.t.streams = append(tt.t.streams, ts)
	return ts, nil
}

func (tt *tapTransport) Close() error { return tt.inner.Close() }

func (s *tapStream) Send(b []byte) error {
	s.record(true, b)
	return s.inner.Send(b)
}

func (s *tapStream) Recv() ([]byte, error) {
	b, err := s.inner.Recv()
	if err == nil {
		s.record(false, b)
	}
	return b, err
}

func (s *tapStream) record(sent bool, b []byte) {
	var m proto.Message
	switch {
	case s.delta && sent:
		m = new(discovery.DeltaDiscoveryRequest)
	case s.delta:
		m = new(discovery.DeltaDiscoveryResponse)
	case sent:
		m = new(discovery.DiscoveryRequest)
	default:
		m = new(discovery.DiscoveryResponse)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		panic(err)
	}
	s.t.mu.Lock()
	s.t.log = append(s.t.log, wire{stream: s.index, sent: sent, msg: m})
	s.t.mu.Unlock()
}

// breakStreams ends every open stream, as a lost connection would.
func (tp *tap) breakStreams() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, s := range tp.streams {
		s.cancel()
	}
}

func (tp *tap) setRefuse(v bool) {
	tp.mu.Lock()
	tp.refuse = v
	tp.mu.Unlock()
}

func (tp *tap) numStreams() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.streams)
}

// messages returns the recorded messages that match.
func (tp *tap) messages(match func(wire) bool) []wire {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []wire
	for _, w := range tp.log {
		if match(w) {
			out = append(out, w)
		}
	}
	return out
}

func withTap(tp *tap) func(*client.Config) {
	return func(c *client.Config) { c.Transport = tp }
}
