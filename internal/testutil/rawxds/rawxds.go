// Package rawxds is a test harness: it runs xdsd's server on a real loopback
// gRPC listener and opens raw xDS streams to it, so protocol tests can script
// requests and read responses exactly as they go over the wire.
package rawxds

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/h2grpc"
	"github.com/xdsd/xdsd/server"
)

// Timeout bounds every wait for a response.
const Timeout = 10 * time.Second

// QuietWindow is how long ExpectNone waits to conclude that no response is
// coming. Tests prefer a barrier (a later change whose response must come
// first) where one exists.
const QuietWindow = 300 * time.Millisecond

// Env is a running server and a client connection to it.
type Env struct {
	Cache  *cache.Cache
	Server *server.Server
	Addr   string
	Conn   *grpc.ClientConn
}

// Start runs a server for c with cfg on 127.0.0.1 and dials it. Everything
// is stopped when the test ends.
func Start(t testing.TB, c *cache.Cache, cfg server.Config) *Env {
	t.Helper()
	gs := NewGRPCServer()
	srv := server.New(c, cfg)
	srv.Register(gs)
	addr := Serve(t, gs)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Env{Cache: c, Server: srv, Addr: addr, Conn: conn}
}

// Serve runs gs on 127.0.0.1 until the test ends, and returns its
// address.
func Serve(t testing.TB, gs GRPCServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
}

// TransportEnv names the environment variable that picks the gRPC server
// transport tests run on: "grpc-go" for grpc-go's, anything else for
// xdsd's own (h2grpc), the daemon's default.
const TransportEnv = "XDSD_TEST_TRANSPORT"

// GRPCServer is what tests need of a gRPC server: *grpc.Server and
// *h2grpc.Server both are one.
type GRPCServer interface {
	grpc.ServiceRegistrar
	Serve(net.Listener) error
	Stop()
	GracefulStop()
}

// NewGRPCServer returns a server on the transport TransportEnv picks, with
// the production options: pre-encoded responses.
func NewGRPCServer() GRPCServer {
	if os.Getenv(TransportEnv) == "grpc-go" {
		return grpc.NewServer(server.GRPCOptions()...)
	}
	return h2grpc.NewServer(h2grpc.Options{Codec: server.Codec{}})
}

// Node returns a node with the given id.
func Node(id string) *corev3.Node { return &corev3.Node{Id: id} }

// Stream is a bidirectional stream of requests Req and responses Resp with
// a background reader, so reads can time out.
type Stream[Req, Resp proto.Message] struct {
	t      testing.TB
	cancel context.CancelFunc
	send   func(Req) error
	resps  chan Resp
	errs   chan error
}

// SotW is a state-of-the-world stream.
type SotW = Stream[*discovery.DiscoveryRequest, *discovery.DiscoveryResponse]

// Delta is an incremental stream.
type Delta = Stream[*discovery.DeltaDiscoveryRequest, *discovery.DeltaDiscoveryResponse]

type bidi[Req, Resp any] interface {
	Send(Req) error
	Recv() (Resp, error)
}

// Open starts a stream with open (a generated client method bound to ctx)
// and reads its responses in the background until the test ends.
func Open[Req, Resp proto.Message, S bidi[Req, Resp]](t testing.TB, open func(ctx context.Context) (S, error)) *Stream[Req, Resp] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := open(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	st := &Stream[Req, Resp]{t: t, cancel: cancel, send: s.Send, resps: make(chan Resp, 1024), errs: make(chan error, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, err := s.Recv()
			if err != nil {
				st.errs <- err
				return
			}
			select {
			case st.resps <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return st
}

// ADS opens a SotW ADS stream.
func (e *Env) ADS(t testing.TB) *SotW {
	c := discovery.NewAggregatedDiscoveryServiceClient(e.Conn)
	return Open[*discovery.DiscoveryRequest, *discovery.DiscoveryResponse](t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse], error) {
		return c.StreamAggregatedResources(ctx)
	})
}

// DeltaADS opens an incremental ADS stream.
func (e *Env) DeltaADS(t testing.TB) *Delta {
	c := discovery.NewAggregatedDiscoveryServiceClient(e.Conn)
	return Open[*discovery.DeltaDiscoveryRequest, *discovery.DeltaDiscoveryResponse](t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse], error) {
		return c.DeltaAggregatedResources(ctx)
	})
}

// Send sends a request or fails the test.
func (s *Stream[Req, Resp]) Send(r Req) {
	s.t.Helper()
	if err := s.send(r); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

// TrySend sends a request and returns the error, for a stream the server
// may have ended already.
func (s *Stream[Req, Resp]) TrySend(r Req) error { return s.send(r) }

// Recv returns the next response, failing the test after Timeout.
func (s *Stream[Req, Resp]) Recv() Resp {
	s.t.Helper()
	return s.RecvWithin(Timeout)
}

// RecvWithin returns the next response, failing the test after d: for a
// response that follows a change larger than a test's usual.
func (s *Stream[Req, Resp]) RecvWithin(d time.Duration) Resp {
	s.t.Helper()
	select {
	case r := <-s.resps:
		return r
	case err := <-s.errs:
		s.t.Fatalf("stream ended while waiting for a response: %v", err)
	case <-time.After(d):
		s.t.Fatalf("no response within %v", d)
	}
	panic("unreachable")
}

// ExpectNone fails the test if a response arrives within QuietWindow.
func (s *Stream[Req, Resp]) ExpectNone() {
	s.t.Helper()
	select {
	case r := <-s.resps:
		s.t.Fatalf("unexpected response: %v", r)
	case err := <-s.errs:
		s.t.Fatalf("stream ended: %v", err)
	case <-time.After(QuietWindow):
	}
}

// Err waits for the stream to end and returns its error.
func (s *Stream[Req, Resp]) Err() error {
	s.t.Helper()
	for {
		select {
		case <-s.resps:
		case err := <-s.errs:
			return err
		case <-time.After(Timeout):
			s.t.Fatalf("stream did not end within %v", Timeout)
			return nil
		}
	}
}

// Close cancels the stream.
func (s *Stream[Req, Resp]) Close() { s.cancel() }
