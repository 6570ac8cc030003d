package h2grpc_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/h2grpc"
)

// grpcGoProbe is the data of grpc-go's bandwidth-probing PING.
var grpcGoProbe = [8]byte{2, 4, 16, 16, 9, 14, 7, 7}

// duplexCall is a FullDuplexCall on stream 1 of a raw connection.
type duplexCall struct {
	t  *testing.T
	nc net.Conn
	w  *http2.Framer // writes to nc
	r  *http2.Framer // reads nc
}

// openDuplex opens a connection to addr and starts a FullDuplexCall on
// stream 1 with raw frames, after SETTINGS with settings.
func openDuplex(t *testing.T, addr string, settings ...http2.Setting) *duplexCall {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &duplexCall{t: t, nc: nc, w: http2.NewFramer(nc, nil), r: http2.NewFramer(io.Discard, nc)}
	c.r.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c.w.WriteSettings(settings...)
	writeCallHeaders(c.w, 1, "/grpc.testing.TestService/FullDuplexCall")
	return c
}

// ask sends a request for one response of one byte.
func (c *duplexCall) ask() { c.askFor(1) }

// askFor sends a request for one response of size bytes.
func (c *duplexCall) askFor(size int32) {
	b, err := proto.Marshal(&testgrpc.StreamingOutputCallRequest{
		ResponseParameters: []*testgrpc.ResponseParameters{{Size: size}}})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.w.WriteData(1, false, append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)); err != nil {
		c.t.Fatal(err)
	}
}

// ping sends a PING carrying data.
func (c *duplexCall) ping(data [8]byte) {
	if err := c.w.WritePing(false, data); err != nil {
		c.t.Fatal(err)
	}
}

// next reads the server's next DATA frame or PING answer, passing over
// any other frame, within a deadline; it returns "data" or "ack" and, for
// an answer, its data.
func (c *duplexCall) next() (string, [8]byte) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			c.t.Fatalf("reading the server's frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			c.t.Fatalf("GOAWAY %v %q", f.ErrCode, f.DebugData())
		case *http2.DataFrame:
			return "data", [8]byte{}
		case *http2.PingFrame:
			if f.IsAck() {
				return "ack", f.Data
			}
		}
	}
}

// serveHolding serves the test service with a server that holds a
// bandwidth probe's answer for up to wait, and returns its address.
func serveHolding(t *testing.T, wait time.Duration) string {
	_, addr := serveHoldingServer(t, wait)
	return addr
}

// serveHoldingServer is serveHolding, which also returns the server.
func serveHoldingServer(t *testing.T, wait time.Duration) (*h2grpc.Server, string) {
	s := h2grpc.NewServer(h2grpc.Options{})
	h2grpc.SetProbeAckMax(s, wait)
	h2grpc.ProbeHolds(s) // for waitHeld
	return s, serveOn(t, s, &service{ended: make(chan error, 16)})
}

// waitHeld waits until n of s's connections hold a probe's answer: it
// looks again each time s holds one (s must come from serveHoldingServer).
func waitHeld(t *testing.T, s *h2grpc.Server, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for h2grpc.ProbesHeld(s) != n {
		select {
		case <-h2grpc.ProbeHolds(s):
		case <-timeout:
			t.Fatalf("%d answers held, want %d", h2grpc.ProbesHeld(s), n)
		}
	}
}

// expect reads the server's next frames and fails unless they are want
// ("data", or "ack" and the answer's data).
func (c *duplexCall) expect(what string, want ...any) {
	c.t.Helper()
	for i, w := range want {
		kind, data := c.next()
		if ack, ok := w.([8]byte); ok && (kind != "ack" || data != ack) || !ok && kind != w {
			c.t.Fatalf("%s, frame %d: %s %v, want %v", what, i, kind, data, w)
		}
	}
}

// TestProbeAnsweredAfterNextResponse: the answer to grpc-go's bandwidth
// probe waits for the next frames the server writes and follows them, so
// that the client reads it after a response; any other PING is answered at
// once.
func TestProbeAnsweredAfterNextResponse(t *testing.T) {
	c := openDuplex(t, serveHolding(t, time.Hour))
	c.ask()
	c.expect("the first response", "data")
	c.ping(grpcGoProbe)
	c.ask() // after the probe: answered at once, its answer would come first
	c.expect("a probe, then a request", "data", grpcGoProbe)
	c.ping([8]byte{9})
	c.expect("another PING", [8]byte{9})
}

// TestProbeAnsweredAlone: with nothing to go with, a probe's answer goes
// alone after the server's wait; a PING answered while a probe's answer
// waits takes it along.
func TestProbeAnsweredAlone(t *testing.T) {
	c := openDuplex(t, serveHolding(t, 50*time.Millisecond))
	c.ping(grpcGoProbe)
	c.expect("a probe, nothing else", grpcGoProbe)

	// Held for an hour, on fresh connections (a fourth PING with nothing
	// sent between ends a connection): a PING answered at once takes the
	// held answer along, and so does a second probe's.
	addr := serveHolding(t, time.Hour)
	c = openDuplex(t, addr)
	c.ping(grpcGoProbe)
	c.ping([8]byte{9})
	c.expect("a probe, then a PING", [8]byte{9}, grpcGoProbe)
	c = openDuplex(t, addr)
	c.ping(grpcGoProbe)
	c.ping(grpcGoProbe)
	c.expect("two probes", grpcGoProbe, grpcGoProbe)
}

// TestProbeHeldWithGrpcGo: grpc-go's client, its windows left to its
// bandwidth estimate, gets small responses (a probe each, held) and then
// large ones, which its windows hold back until it credits them: nothing
// waits for a held answer, and every response comes.
func TestProbeHeldWithGrpcGo(t *testing.T) {
	s, addr := serveHoldingServer(t, time.Hour)
	st, err := dial(t, addr).FullDuplexCall(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, size := range []int32{1, 1, 1, 3 << 20, 1, 3 << 20, 3 << 20, 1} {
		if err := st.Send(&testgrpc.StreamingOutputCallRequest{
			ResponseParameters: []*testgrpc.ResponseParameters{{Size: size}}}); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("the response of %d bytes: %v", size, err)
		}
		if n := len(r.GetPayload().GetBody()); n != int(size) {
			t.Fatalf("got %d bytes, want %d", n, size)
		}
		if i == 0 { // the client probes on its first DATA frame
			waitHeld(t, s, 1)
		}
	}
}

// TestProbeSweep: a sweep sends the answers held before the sweep before
// it began, and only those, and arms the next sweep for the others.
func TestProbeSweep(t *testing.T) {
	s, addr := serveHoldingServer(t, time.Hour)
	c, d := openDuplex(t, addr), openDuplex(t, addr)
	c.ping(grpcGoProbe)
	d.ping(grpcGoProbe)
	waitHeld(t, s, 2)
	h2grpc.SweepProbes(s)
	if n := h2grpc.ProbesHeld(s); n != 2 || !h2grpc.ProbeSweepArmed(s) {
		t.Fatalf("after a sweep with nothing due: %d answers held, want 2; next sweep armed: %v",
			n, h2grpc.ProbeSweepArmed(s))
	}
	h2grpc.SweepProbes(s)
	c.expect("a probe, then two sweeps", grpcGoProbe)
	d.expect("a probe, then two sweeps", grpcGoProbe)
	if n := h2grpc.ProbesHeld(s); n != 0 {
		t.Fatalf("after the answers went, %d held", n)
	}
}

// TestProbeSweepPassesStuckWriter: a client that asked for a large
// response and reads nothing keeps its connection's writer waiting on the
// socket; the sweep passes that connection over and answers the others'
// probes.
func TestProbeSweepPassesStuckWriter(t *testing.T) {
	addr := serveHolding(t, 50*time.Millisecond)
	stuck := openDuplex(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	stuck.nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	stuck.w.WriteWindowUpdate(0, 1<<30)
	stuck.askFor(8 << 20)

	var calls []*duplexCall
	for range 8 {
		c := openDuplex(t, addr)
		c.ping(grpcGoProbe)
		calls = append(calls, c)
	}
	for i, c := range calls {
		c.expect(fmt.Sprintf("connection %d's probe", i), grpcGoProbe)
	}
}
