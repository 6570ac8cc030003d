package h2grpc_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/xdsd/xdsd/h2grpc"
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
)

// nextPing reads the server's frames until a PING that is not an answer,
// and returns its data; it fails on anything that ends the connection.
func nextPing(t *testing.T, c *duplexCall) [8]byte {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for a keepalive ping: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			return p.Data
		}
	}
}

// readUntilClosed reads the server's frames until the server closes the
// connection, and returns how many PINGs came; it fails if the connection
// is still open after 10 s.
func readUntilClosed(t *testing.T, c *duplexCall) int {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	pings := 0
	for {
		f, err := c.r.ReadFrame()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the connection is still open after 10 s (%d pings)", pings)
		}
		if err != nil {
			return pings
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			pings++
		}
	}
}

// TestKeepalivePingsIdleConnection: a connection that reads nothing for
// KeepaliveTime is pinged; a client that answers keeps its connection, is
// pinged again after as long, and its stream still works.
func TestKeepalivePingsIdleConnection(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{KeepaliveTime: 20 * time.Millisecond, KeepaliveTimeout: 10 * time.Second})
	c := openDuplex(t, addr)
	for range 3 {
		data := nextPing(t, c)
		if err := c.w.WritePing(true, data); err != nil {
			t.Fatal(err)
		}
	}
	c.ask()
	c.expect("a response after the pings", "data")
}

// TestKeepaliveClosesSilentConnection: a client that reads but does not
// answer the ping is disconnected once KeepaliveTimeout has passed, and its
// stream's handler ends; a connection that cannot be shut down one way at
// a time is closed.
func TestKeepaliveClosesSilentConnection(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(connKinds[plain], func(t *testing.T) {
			svc := &service{ended: make(chan error, 16)}
			s := h2grpc.NewServer(h2grpc.Options{KeepaliveTime: 20 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond})
			c := openDuplex(t, servePlainOr(t, s, svc, plain))
			c.ask()
			if pings := readUntilClosed(t, c); pings == 0 {
				t.Error("the connection was closed without a ping")
			}
			waitEnded(t, svc)
			if _, aborts := h2grpc.KeepaliveCounts(s); aborts != 1 {
				t.Errorf("%d connections closed for want of an answer, want 1", aborts)
			}
		})
	}
}

// TestKeepaliveEndsStuckWriter: a client that asked for a large response
// and reads nothing holds its handler's send on a full socket; the
// keepalive check closes the connection, which fails the send.
func TestKeepaliveEndsStuckWriter(t *testing.T) {
	_, svc, addr := start(t, h2grpc.Options{KeepaliveTime: 20 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond})
	c := openDuplex(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	c.nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	c.w.WriteWindowUpdate(0, 1<<30)
	c.askFor(16 << 20)
	waitEnded(t, svc)
}

// waitEnded waits for one of svc's FullDuplexCall handlers to end.
func waitEnded(t *testing.T, svc *service) {
	t.Helper()
	select {
	case <-svc.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's handler has not ended")
	}
}

// TestKeepaliveWithGrpcGo: grpc-go's client answers the server's pings,
// and its stream outlives many of them, for longer than KeepaliveTimeout,
// over cleartext and over TLS.
func TestKeepaliveWithGrpcGo(t *testing.T) {
	t.Run("cleartext", func(t *testing.T) { testKeepaliveWithGrpcGo(t, nil) })
	t.Run("tls", func(t *testing.T) {
		ca := testcerts.NewCA(t, "ca")
		cert := ca.Issue(t, "localhost", true).TLSCertificate(t)
		testKeepaliveWithGrpcGo(t, &tls.Config{Certificates: []tls.Certificate{cert}},
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})))
	})
}

func testKeepaliveWithGrpcGo(t *testing.T, cfg *tls.Config, dialOpts ...grpc.DialOption) {
	const want = 20
	s := h2grpc.NewServer(h2grpc.Options{TLS: cfg, KeepaliveTime: 10 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond})
	pinged := make(chan struct{}, want)
	h2grpc.OnKeepalivePing(s, func() {
		select {
		case pinged <- struct{}{}:
		default:
		}
	})
	addr := serveOn(t, s, &service{ended: make(chan error, 16)})
	stream, err := dial(t, addr, dialOpts...).FullDuplexCall(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	exchange := func() {
		t.Helper()
		err := stream.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}})
		if err == nil {
			_, err = stream.Recv()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	exchange()
	timeout := time.After(10 * time.Second)
	for range want {
		select {
		case <-pinged:
		case <-timeout:
			t.Fatalf("fewer than %d keepalive pings in 10 s", want)
		}
	}
	exchange()
	if _, aborts := h2grpc.KeepaliveCounts(s); aborts != 0 {
		t.Errorf("%d connections closed for want of an answer", aborts)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("end of stream: %v", err)
	}
}
