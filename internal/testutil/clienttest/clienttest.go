// Package clienttest holds the helpers of the client library's tests: the
// four ways of talking xDS, a client for each, a Watcher that records its
// callbacks, and a transport that records every message and can break
// streams. The client package's tests and the interoperability tests
// against other servers share them.
package clienttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/client/grpctransport"
	"github.com/xdsd/xdsd/client/transport"
	"github.com/xdsd/xdsd/internal/testutil/poll"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
)

// Timeout bounds every wait for something a test expects.
const Timeout = 10 * time.Second

// Variant is one way of talking xDS: aggregated or one stream per type,
// state of the world or delta.
type Variant struct {
	Name       string
	ADS, Delta bool
}

// Variants are the four ways of talking xDS.
var Variants = []Variant{
	{"sotw_ads", true, false},
	{"sotw_per_type", false, false},
	{"delta_ads", true, true},
	{"delta_per_type", false, true},
}

// ForEachVariant runs f as a subtest for each of Variants.
func ForEachVariant(t *testing.T, f func(t *testing.T, v Variant)) {
	for _, v := range Variants {
		t.Run(v.Name, func(t *testing.T) { f(t, v) })
	}
}

// DialOptions are the gRPC dial options of the tests' clients: plaintext.
var DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}

// NewClient returns a client of addr for v, closed when the test ends.
// edit, if not nil, changes the configuration before client.New.
func NewClient(t testing.TB, addr string, v Variant, edit func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{
		Node:        rawxds.Node("test-" + v.Name),
		Server:      addr,
		DialOptions: DialOptions,
		ADS:         v.ADS,
		Delta:       v.Delta,
		Backoff:     Backoff,
	}
	return New(t, cfg, edit)
}

// Backoff is the reconnection backoff of the tests' clients: short, so
// that tests of reconnection are quick.
func Backoff(int) time.Duration { return 10 * time.Millisecond }

// New returns the client of cfg, after edit, if not nil, has changed it;
// the client is closed when the test ends.
func New(t testing.TB, cfg client.Config, edit func(*client.Config)) *client.Client {
	t.Helper()
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

// RejectPort is a Validate hook that rejects endpoints on port p.
func RejectPort(p uint32) func(string, string, proto.Message) error {
	return func(typeURL, name string, m proto.Message) error {
		if typeURL == resource.EndpointType && Port(client.Update{Message: m}) == p {
			return fmt.Errorf("port %d rejected", p)
		}
		return nil
	}
}

// Port returns the port of the first endpoint of a ClusterLoadAssignment,
// 0 if it has none.
func Port(u client.Update) uint32 {
	cla, _ := u.Message.(*endpointv3.ClusterLoadAssignment)
	eps := cla.GetEndpoints()
	if len(eps) == 0 || len(eps[0].GetLbEndpoints()) == 0 {
		return 0
	}
	return eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
}

// Eventually polls cond until it holds, and fails the test if it does not
// within Timeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, Timeout, what, cond)
}

// Event is one watcher callback.
type Event struct {
	Kind   string // "update", "error" or "dne"
	Name   string
	Update client.Update
	Err    error
}

// Recorder is a client.Watcher that records its callbacks in order.
type Recorder struct{ ch chan Event }

var _ client.Watcher = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{ch: make(chan Event, 10000)} }

// OnUpdate records an update.
func (r *Recorder) OnUpdate(u client.Update) { r.ch <- Event{Kind: "update", Name: u.Name, Update: u} }

// OnError records an error.
func (r *Recorder) OnError(err error) { r.ch <- Event{Kind: "error", Err: err} }

// OnDoesNotExist records that a resource does not exist.
func (r *Recorder) OnDoesNotExist(n string) { r.ch <- Event{Kind: "dne", Name: n} }

// WaitFor returns the first event that match accepts, skipping others, and
// fails the test if none comes within Timeout.
func (r *Recorder) WaitFor(t testing.TB, what string, match func(Event) bool) Event {
	t.Helper()
	deadline := time.After(Timeout)
	for {
		select {
		case e := <-r.ch:
			if match(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s within %v", what, Timeout)
		}
	}
}

// Next returns the next event that is not an error.
func (r *Recorder) Next(t testing.TB) Event {
	t.Helper()
	return r.WaitFor(t, "event", func(e Event) bool { return e.Kind != "error" })
}

// Poll returns the next recorded event without waiting; ok is false if
// there is none.
func (r *Recorder) Poll() (e Event, ok bool) {
	select {
	case e := <-r.ch:
		return e, true
	default:
		return Event{}, false
	}
}

// NoneYet fails the test if an event other than an error has been
// recorded.
func (r *Recorder) NoneYet(t testing.TB) {
	t.Helper()
	for {
		e, ok := r.Poll()
		if !ok {
			return
		}
		if e.Kind != "error" {
			t.Fatalf("unexpected %s %q", e.Kind, e.Name)
		}
	}
}

// WantUpdate fails the test unless the next event other than an error is an
// update of name, and returns the update.
func (r *Recorder) WantUpdate(t testing.TB, name string) client.Update {
	t.Helper()
	e := r.Next(t)
	if e.Kind != "update" || e.Name != name {
		t.Fatalf("got %s %q (%v), want update %q", e.Kind, e.Name, e.Err, name)
	}
	return e.Update
}

// WantDNE fails the test unless the next event other than an error says
// that name does not exist.
func (r *Recorder) WantDNE(t testing.TB, name string) {
	t.Helper()
	e := r.Next(t)
	if e.Kind != "dne" || e.Name != name {
		t.Fatalf("got %s %q, want does-not-exist %q", e.Kind, e.Name, name)
	}
}

// Tap is a transport.Builder around the gRPC transport that records every
// message and lets a test break streams and refuse new ones: the test
// double at the transport boundary. Its zero value is ready to use.
type Tap struct {
	mu      sync.Mutex // guards the fields below
	streams []*tapStream
	refuse  bool
	log     []Wire
}

// Wire is one message on a tapped stream.
type Wire struct {
	Stream int  // the stream's index, in the order they were opened
	Sent   bool // a request; false: a response
	Msg    proto.Message
}

type tapStream struct {
	inner  transport.Stream
	cancel context.CancelFunc
	t      *Tap
	index  int
	delta  bool
}

type tapTransport struct {
	t     *Tap
	inner transport.Transport
}

// WithTap returns a configuration edit, for NewClient, that sets the
// client's transport to tp.
func WithTap(tp *Tap) func(*client.Config) {
	return func(c *client.Config) { c.Transport = tp }
}

// Build returns a transport of server that tp records.
func (tp *Tap) Build(server string) (transport.Transport, error) {
	inner, err := grpctransport.Builder{DialOptions: DialOptions}.Build(server)
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
	s.t.log = append(s.t.log, Wire{Stream: s.index, Sent: sent, Msg: m})
	s.t.mu.Unlock()
}

// BreakStreams ends every open stream, as a lost connection would.
func (tp *Tap) BreakStreams() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, s := range tp.streams {
		s.cancel()
	}
}

// SetRefuse sets whether new streams are refused.
func (tp *Tap) SetRefuse(v bool) {
	tp.mu.Lock()
	tp.refuse = v
	tp.mu.Unlock()
}

// NumStreams returns how many streams have been opened.
func (tp *Tap) NumStreams() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.streams)
}

// Messages returns the recorded messages that match accepts, in order.
func (tp *Tap) Messages(match func(Wire) bool) []Wire {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []Wire
	for _, w := range tp.log {
		if match(w) {
			out = append(out, w)
		}
	}
	return out
}
