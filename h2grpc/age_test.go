package h2grpc_test

import (
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/h2grpc"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// serveCounting serves svc with opts and returns its address and the
// count of its connections.
func serveCounting(t *testing.T, opts h2grpc.Options) (string, *countingListener) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: lis}
	serveListener(t, h2grpc.NewServer(opts), cl, &service{ended: make(chan error, 16)})
	return lis.Addr().String(), cl
}

// exchange sends a request on st and receives its response.
func exchange(st testgrpc.TestService_FullDuplexCallClient) error {
	if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 3}}}); err != nil {
		return err
	}
	_, err := st.Recv()
	return err
}

// started serves with opts and returns a client, a stream of it that has
// made one exchange, and the count of the server's connections.
func started(t *testing.T, opts h2grpc.Options) (testgrpc.TestServiceClient, testgrpc.TestService_FullDuplexCallClient, *countingListener) {
	t.Helper()
	addr, lis := serveCounting(t, opts)
	c := dial(t, addr)
	st, err := c.FullDuplexCall(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := exchange(st); err != nil {
		t.Fatal(err)
	}
	return c, st, lis
}

func TestMaxConnectionAge(t *testing.T) {
	t.Run("past_its_age_and_grace_a_stream_ends_unavailable", func(t *testing.T) {
		c, st, lis := started(t, h2grpc.Options{MaxConnectionAge: 200 * time.Millisecond, MaxConnectionAgeGrace: 200 * time.Millisecond})
		_, err := st.Recv() // the server sends nothing more: this waits for the end
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the stream ended with %v, want UNAVAILABLE", err)
		}
		// The client calls again, on a new connection.
		st2, err := c.FullDuplexCall(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := exchange(st2); err != nil {
			t.Fatalf("a call after the connection's age: %v", err)
		}
		if n := lis.accepted.Load(); n < 2 {
			t.Fatalf("%d connections, want a new one after the first's age", n)
		}
	})
	t.Run("without_grace_open_streams_run_on", func(t *testing.T) {
		c, st, lis := started(t, h2grpc.Options{MaxConnectionAge: 100 * time.Millisecond})
		// Past the first connection's age, new calls go on a new one.
		deadline := time.Now().Add(10 * time.Second)
		for lis.accepted.Load() < 2 {
			if _, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{}); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("no new connection after the first's age")
			}
		}
		if err := exchange(st); err != nil {
			t.Fatalf("the stream open on the aged connection broke: %v", err)
		}
	})
}

// TestMaxConnectionAgeGraceMidMessage: at the end of a connection's grace,
// a stream whose message is part sent, the rest waiting for window the
// client does not give, gets no trailers, which its client would read as
// a message cut short; the connection is closed instead (its calls fail
// UNAVAILABLE on the client), after an idle stream's trailers.
func TestMaxConnectionAgeGraceMidMessage(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{MaxConnectionAge: 100 * time.Millisecond, MaxConnectionAgeGrace: 200 * time.Millisecond, MinPingInterval: -1})
	_, fr := dialFramer(t, addr)
	startDuplex(t, fr, 1, 1) // answered whole, then idle
	readData(t, fr, map[uint32]int{1: responseLen(1)})
	const size = 200 << 10 // more than the 64 KiB windows the client gives and never adds to
	startDuplex(t, fr, 3, size)
	data := map[uint32]int{}
	var trailers []uint32
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break // the server closed the connection
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			data[f.StreamID] += len(f.Data())
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				trailers = append(trailers, f.StreamID)
				if f.StreamID == 1 && headerValue(f, "grpc-status") != "14" {
					t.Errorf("the idle stream ended with grpc-status %q, want 14 (UNAVAILABLE)", headerValue(f, "grpc-status"))
				}
			}
		}
	}
	if data[3] == 0 || data[3] >= responseLen(size) {
		t.Fatalf("%d bytes of the large message sent, want part of its %d", data[3], responseLen(size))
	}
	if !slices.Equal(trailers, []uint32{1}) {
		t.Fatalf("trailers on streams %v, want on the idle stream 1 only: on stream 3 they would end its message %d bytes in", trailers, data[3])
	}
}
