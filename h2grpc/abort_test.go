package h2grpc_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/xdsd/xdsd/h2grpc"
)

// TestFailedWriteEndsConnection: a write that fails ends the connection at
// once, though its reader, which may be waiting on a socket that will tell
// it nothing more, has read no error; the stream's handler ends with it.
// A connection that cannot be shut down one way at a time is closed.
func TestFailedWriteEndsConnection(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(connKinds[plain], func(t *testing.T) {
			svc := &service{ended: make(chan error, 16)}
			s := h2grpc.NewServer(h2grpc.Options{})
			addr := servePlainOr(t, s, svc, plain)

			c := openDuplex(t, addr)
			c.ask()
			c.expect("the first response", "data")
			h2grpc.BreakWrites(s)
			c.ask() // its response's write fails
			c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				_, err := c.r.ReadFrame()
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("the connection is still open 5 s after a write failed")
				}
				if err != nil {
					break // the server closed it
				}
			}
			select {
			case <-svc.ended:
			case <-time.After(5 * time.Second):
				t.Fatal("the stream's handler has not ended")
			}
		})
	}
}

// connKinds names the subtests of servePlainOr's two kinds of connection.
var connKinds = map[bool]string{false: "tcp", true: "plain_conn"}

// servePlainOr serves svc with s on 127.0.0.1, handing out the accepted
// connections as bare net.Conns if plain, and returns its address; s stops
// when the test ends.
func servePlainOr(t *testing.T, s *h2grpc.Server, svc testgrpc.TestServiceServer, plain bool) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if plain {
		lis = plainListener{lis}
	}
	serveListener(t, s, lis, svc)
	return addr
}

// plainListener hands out its connections as bare net.Conns, which cannot
// be shut down one way at a time.
type plainListener struct{ net.Listener }

func (l plainListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return struct{ net.Conn }{nc}, nil
}

// serveListener serves svc with s on lis; s stops when the test ends.
func serveListener(t testing.TB, s *h2grpc.Server, lis net.Listener, svc testgrpc.TestServiceServer) {
	testgrpc.RegisterTestServiceServer(s, svc)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}
