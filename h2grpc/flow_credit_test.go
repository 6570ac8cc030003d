package h2grpc_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/h2grpc"
)

// TestWindowsCreditedBack: a client that sends a quarter of the windows
// gets both back, the connection's and the stream's; and the connection's
// window is credited back for DATA the server refuses (on a half-closed
// stream) or drops (on a stream that has ended, padding included), where
// the stream's is not.
func TestWindowsCreditedBack(t *testing.T) {
	const window = 64 << 10
	svc := &lingerService{handled: make(chan struct{}, 1024), ended: make(chan struct{}), release: make(chan struct{})}
	_, addr := serve(t, h2grpc.Options{InitialWindowSize: window, InitialConnWindowSize: window}, svc)
	defer close(svc.release) // before the server stops
	nc, rfr := openCall(t, addr)
	b, err := proto.Marshal(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, 4000)}})
	if err != nil {
		t.Fatal(err)
	}
	msg := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
	var w bytes.Buffer
	fr := http2.NewFramer(&w, nil)
	write := func() {
		t.Helper()
		if _, err := nc.Write(w.Bytes()); err != nil {
			t.Fatal(err)
		}
		w.Reset()
	}
	// The server first raises the connection's window from HTTP/2's
	// 65,535 bytes to its own.
	const initial = window - 65535
	var sent uint32
	// send writes DATA frames of msg on stream 1 until a quarter of the
	// window is sent, the last with end.
	send := func(end bool) {
		t.Helper()
		for n := 0; n < window/4; n += len(msg) {
			fr.WriteData(1, end && n+len(msg) >= window/4, msg)
			sent += uint32(len(msg))
		}
		write()
	}
	// credits reads frames until less than a quarter of the window of the
	// sent bytes is left to credit on the connection (the server credits
	// once a quarter is used), and, if stream, until stream 1 has been
	// credited as much as the connection.
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	credited := map[uint32]uint32{}
	credits := func(stream bool) {
		t.Helper()
		for initial+sent-credited[0] >= window/4 || stream && credited[1] != credited[0]-initial {
			f, err := rfr.ReadFrame()
			if err != nil {
				t.Fatalf("credited %v of %d bytes sent: %v", credited, sent, err)
			}
			if u, ok := f.(*http2.WindowUpdateFrame); ok {
				credited[u.StreamID] += u.Increment
			}
		}
	}

	// A first request, once handled, tells that the handler takes the
	// next ones inline, so that the stream credits them at once.
	fr.WriteData(1, false, msg)
	sent += uint32(len(msg))
	write()
	<-svc.handled
	send(false)
	credits(true)
	send(true) // ends stream 1's side
	credits(true)
	<-svc.ended
	open := credited[1]
	// On the half-closed stream: refused, in one frame that makes the
	// connection's credit fall due.
	fr.WriteData(1, false, make([]byte, window/4))
	sent += window / 4
	write()
	credits(false)
	if credited[1] != open {
		t.Errorf("stream 1 was credited %d bytes after its end, want none", credited[1]-open)
	}
	// On a stream that has ended: stream 3, refused before any handler
	// ran (an unknown method), so that it is gone once its trailers came.
	writeCallHeaders(fr, 3, "/no.such.Service/Method")
	write()
	for {
		f, err := rfr.ReadFrame()
		if err != nil {
			t.Fatalf("no trailers for stream 3: %v", err)
		}
		if u, ok := f.(*http2.WindowUpdateFrame); ok {
			credited[u.StreamID] += u.Increment
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 3 && h.StreamEnded() {
			break
		}
	}
	fr.WriteData(3, false, make([]byte, window/8))
	fr.WriteDataPadded(3, false, make([]byte, window/8), make([]byte, 100))
	sent += window/4 + 101
	write()
	credits(false)
	if credited[3] != 0 {
		t.Errorf("stream 3 was credited %d bytes after its end, want none", credited[3])
	}
}

// lingerService's StreamingInputCall takes every request inline, says so
// on handled, and once the client has ended its side, closes ended and
// returns only after release is closed: the stream stays half-closed.
type lingerService struct {
	testgrpc.UnimplementedTestServiceServer
	handled, ended, release chan struct{}
}

func (s *lingerService) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	g := stream.(*grpc.GenericServerStream[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse])
	g.ServerStream.(h2grpc.InlineReceiver).SetInline(func([]byte) bool {
		s.handled <- struct{}{}
		return true
	})
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
		s.handled <- struct{}{}
	}
	close(s.ended)
	<-s.release
	return nil
}
