package h2grpc_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/h2grpc"
)

// TestFramesSplitAnyhow writes a client's stream of frames (gRPC messages
// cut into DATA frames anywhere, some padded, with WINDOW_UPDATE, PRIORITY
// and SETTINGS frames between them) in writes of random sizes, from one
// byte to more than the server's big read buffer, so that the server's
// reads end inside frame headers and payloads and also fill its buffers. Every request
// must be handled once and in order, inline (those of an odd size, while
// the handler waits) or through Recv (see inlineService), and the call must
// end OK.
func TestFramesSplitAnyhow(t *testing.T) {
	svc := &inlineService{takes: func(n int) bool { return n%2 == 1 }, seen: make(chan struct{}, 1<<14)}
	// Windows larger than everything sent: the client needs no credit.
	_, addr := serve(t, h2grpc.Options{InitialWindowSize: 1 << 30, InitialConnWindowSize: 1 << 30}, svc)
	var want []int
	for seed := range uint64(8) {
		rnd := rand.New(rand.NewPCG(seed, 1))
		wire, sizes, ends := splitCall(t, rnd)
		base := len(want)
		want = append(want, sizes...)
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		status := make(chan string, 1)
		go func() { status <- readStatus(nc) }()
		for off := 0; off < len(wire); {
			n := min(len(wire)-off, 1+rnd.IntN(20_000))
			switch rnd.IntN(8) {
			case 0, 1, 2, 3:
				n = min(n, 1+rnd.IntN(12)) // a frame header, or less
			case 4:
				n = min(len(wire)-off, 1+rnd.IntN(150_000)) // more than the big read buffer
			}
			if _, err := nc.Write(wire[off : off+n]); err != nil {
				t.Fatal(err)
			}
			off += n
			if rnd.IntN(2) == 0 {
				// Now and then, let the handler catch up with what is
				// complete, so that the next requests may go inline.
				complete := 0
				for complete < len(ends) && ends[complete] <= off {
					complete++
				}
				svc.waitFor(t, base+complete)
			}
		}
		select {
		case st := <-status:
			if st != "0" {
				t.Fatalf("seed %d: grpc-status %q, want 0", seed, st)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("seed %d: no response: a frame the server read was left unhandled", seed)
		}
		nc.Close()
	}
	svc.checkHandled(t, want)
}

// splitCall returns the bytes a client sends for one StreamingInputCall of
// random requests, their payload sizes, and for each request the length of
// the bytes that complete it.
func splitCall(t *testing.T, rnd *rand.Rand) (wire []byte, sizes []int, ends []int) {
	var msgs []byte
	var msgEnds []int
	for range 300 {
		size := 1
		switch r := rnd.IntN(10); {
		case r == 0:
			size = rnd.IntN(40_000)
		case r < 3:
			size = 2 + rnd.IntN(100)
		}
		b, err := proto.Marshal(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, size)}})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, 0)
		msgs = binary.BigEndian.AppendUint32(msgs, uint32(len(b)))
		msgs = append(msgs, b...)
		sizes = append(sizes, size)
		msgEnds = append(msgEnds, len(msgs))
	}
	var w bytes.Buffer
	fr := startCall(&w)
	for pos := 0; pos < len(msgs); {
		n := min(len(msgs)-pos, 1+rnd.IntN(16<<10-300))
		end := pos+n == len(msgs)
		if rnd.IntN(4) == 0 {
			fr.WriteDataPadded(1, end, msgs[pos:pos+n], make([]byte, rnd.IntN(256)))
		} else {
			fr.WriteData(1, end, msgs[pos:pos+n])
		}
		pos += n
		for len(ends) < len(msgEnds) && msgEnds[len(ends)] <= pos {
			ends = append(ends, w.Len())
		}
		switch rnd.IntN(12) {
		case 0:
			fr.WriteWindowUpdate(0, 1000)
		case 1:
			if !end {
				fr.WriteWindowUpdate(1, 1000)
			}
		case 2:
			fr.WritePriority(1, http2.PriorityParam{Weight: 15})
		case 3:
			fr.WriteSettings()
		}
	}
	return w.Bytes(), sizes, ends
}

// waitFor waits until n requests have been handled.
func (s *inlineService) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for len(s.seenSoFar()) < n {
		select {
		case <-s.seen:
		case <-deadline:
			t.Fatalf("%d requests handled, want %d", len(s.seenSoFar()), n)
		}
	}
}

// readStatus reads the server's frames until the trailers of stream 1 and
// returns their grpc-status ("" if the connection ended first).
func readStatus(nc net.Conn) string {
	fr := http2.NewFramer(io.Discard, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return ""
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 1 && h.StreamEnded() {
			for _, f := range h.Fields {
				if f.Name == "grpc-status" {
					return f.Value
				}
			}
			return ""
		}
	}
}

// startCall writes to w what a client sends to start a StreamingInputCall
// on stream 1 of a new connection, and returns a framer that writes to w.
func startCall(w *bytes.Buffer) *http2.Framer {
	w.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(w, nil)
	fr.WriteSettings()
	writeCallHeaders(fr, 1, "/grpc.testing.TestService/StreamingInputCall")
	return fr
}

// writeCallHeaders writes the HEADERS frame that starts a gRPC call of
// method path on stream id.
func writeCallHeaders(fr *http2.Framer, id uint32, path string) {
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: headerBlock(callFields(path)), EndHeaders: true})
}

// callFields are the header fields that start a gRPC call of method path.
func callFields(path string) [][2]string {
	return [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "x"},
		{":path", path}, {"content-type", "application/grpc"}, {"te", "trailers"}}
}

// headerBlock encodes fields, in order, as a header block.
func headerBlock(fields [][2]string) []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}) // writes to a bytes.Buffer do not fail
	}
	return hb.Bytes()
}

// openCall opens a connection to addr and starts a StreamingInputCall on
// stream 1 with raw frames; it returns the connection and a framer that
// reads the server's frames.
func openCall(t testing.TB, addr string) (*net.TCPConn, *http2.Framer) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc := c.(*net.TCPConn)
	t.Cleanup(func() { nc.Close() })
	var w bytes.Buffer
	startCall(&w)
	if _, err := nc.Write(w.Bytes()); err != nil {
		t.Fatal(err)
	}
	rfr := http2.NewFramer(io.Discard, nc)
	rfr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	return nc, rfr
}

// TestEOFWithData: a client's last DATA frame and its FIN may come in one
// segment, and so in one readiness event of the socket; the server must
// still see the end of the connection and close its side.
func TestEOFWithData(t *testing.T) {
	b, err := proto.Marshal(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: []byte{1}}})
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	http2.NewFramer(&w, nil).WriteData(1, false, append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...))
	for _, cork := range []bool{true, false} {
		for i := range 10 {
			svc := &inlineService{seen: make(chan struct{}, 16)}
			s, addr := serve(t, h2grpc.Options{}, svc)
			nc, _ := openCall(t, addr)
			// A first request, handled: the server waits for the socket.
			if _, err := nc.Write(w.Bytes()); err != nil {
				t.Fatal(err)
			}
			svc.waitFor(t, 1)
			if cork { // the DATA frame and the FIN in one segment
				raw, err := nc.SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				raw.Control(corkSocket)
			}
			if _, err := nc.Write(w.Bytes()); err != nil {
				t.Fatal(err)
			}
			nc.CloseWrite()
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, nc); err != nil {
				t.Fatalf("cork %v, connection %d: the server did not close its side after the client's: %v", cork, i, err)
			}
			nc.Close()
			s.Stop()
		}
	}
}

// TestHeaderBlockLeftOpen: while a header block is open (HEADERS without
// END_HEADERS), a WINDOW_UPDATE is a connection error, as the framer
// says, not a frame handled on the fast path; and a HEADERS frame whose
// padding is longer than it, whose fragment is then not decoded, is a
// connection error too (RFC 9113 §6.2): refused as a stream error, it left
// the HPACK table out of step with the client's.
func TestHeaderBlockLeftOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames func(fr *http2.Framer)
	}{
		{"window_update_inside", func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: headerBlock(callFields("/grpc.testing.TestService/UnaryCall"))})
		}},
		{"padding_longer_than_the_frame", func(fr *http2.Framer) {
			fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersPadded, 3, []byte{200, 1, 2})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &inlineService{seen: make(chan struct{}, 1024)}
			_, addr := serve(t, h2grpc.Options{}, svc)
			nc, rfr := openCall(t, addr)
			var w bytes.Buffer
			fr := http2.NewFramer(&w, nil)
			fr.AllowIllegalWrites = true
			tc.frames(fr)
			if _, err := nc.Write(w.Bytes()); err != nil {
				t.Fatal(err)
			}
			w.Reset()
			fr.WriteWindowUpdate(0, 1000)
			_, _ = nc.Write(w.Bytes()) // in a write of its own; the server may have closed already
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			for {
				f, err := rfr.ReadFrame()
				if err != nil {
					t.Fatalf("no GOAWAY: %v", err)
				}
				if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == 3 {
					t.Fatalf("RST_STREAM on stream 3 %v, want the connection ended", rst.ErrCode)
				}
				if g, ok := f.(*http2.GoAwayFrame); ok {
					if g.ErrCode != http2.ErrCodeProtocol {
						t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", g.ErrCode)
					}
					return
				}
			}
		})
	}
}

// sinkService's StreamingInputCall takes the requests of an odd size
// inline and receives the others, keeping none.
type sinkService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (sinkService) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	g := stream.(*grpc.GenericServerStream[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse])
	g.ServerStream.(h2grpc.InlineReceiver).SetInline(func(msg []byte) bool {
		var req testgrpc.StreamingInputCallRequest
		return len(msg)%2 == 1 && proto.Unmarshal(msg, &req) == nil // as Recv would
	})
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{})
			}
			return err
		}
	}
}

// callOutcome is how a connection that sent some frames ended: the GOAWAY
// error code, if the server sent one.
type callOutcome struct {
	goAway bool
	code   http2.ErrCode
}

// sendFrames starts a call on addr, writes frames after it in chunks
// chosen by seed, ends the client's side, and returns how the connection
// ended. The server must close it.
func sendFrames(t *testing.T, addr string, frames []byte, seed uint64) callOutcome {
	nc, rfr := openCall(t, addr)
	type result struct {
		o   callOutcome
		err error
	}
	got := make(chan result, 1)
	go func() { // ends when nc does, or at its deadline
		var o callOutcome
		for {
			f, err := rfr.ReadFrame()
			if err != nil {
				got <- result{o, err}
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok && !o.goAway {
				o.goAway, o.code = true, g.ErrCode
			}
		}
	}()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	rnd := rand.New(rand.NewPCG(seed, 2))
	for off := 0; off < len(frames); {
		n := min(len(frames)-off, 1+rnd.IntN(64))
		if _, err := nc.Write(frames[off : off+n]); err != nil {
			break // the server closed the connection
		}
		off += n
	}
	nc.CloseWrite()
	r := <-got
	if ne, ok := r.err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server did not close the connection: %+v so far", r.o)
	}
	return r.o
}

// FuzzFramesBothPaths sends the same frames after a call's start, cut the
// same way, to a server that handles DATA, WINDOW_UPDATE and PING frames inside
// its socket reads and to one that reads every frame in its read loop: both
// must close the connection, with the same GOAWAY code or none. Outcomes
// that depend on timing on any one server are not compared: how far the
// call's handler got (it may end, and its stream be forgotten, before
// later frames on it are read), so neither are those of frames that end
// or reset the stream or may open one (HEADERS, CONTINUATION).
func FuzzFramesBothPaths(f *testing.F) {
	opts := h2grpc.Options{
		InitialWindowSize: 1 << 30, InitialConnWindowSize: 1 << 30, // no flow-control races
		MinPingInterval: -1, // nor ping strikes, which a handler's response clears
	}
	_, inside := serve(f, opts, sinkService{})
	pull := h2grpc.NewServer(opts)
	h2grpc.PullOnly(pull)
	loopOnly := serveOn(f, pull, sinkService{})
	for i, frames := range seedFrames(f) {
		f.Add(frames, uint64(i))
	}
	f.Fuzz(func(t *testing.T, frames []byte, seed uint64) {
		a, b := sendFrames(t, inside, frames, seed), sendFrames(t, loopOnly, frames, seed)
		if a != b && !timingBound(frames) {
			t.Fatalf("handled inside reads: %+v; in the read loop only: %+v", a, b)
		}
	})
}

// timingBound reports whether frames hold a frame whose outcome may
// depend on whether the call's handler has ended: HEADERS, CONTINUATION,
// RST_STREAM, or DATA that ends its stream.
func timingBound(frames []byte) bool {
	for len(frames) >= 9 {
		n := int(frames[0])<<16 | int(frames[1])<<8 | int(frames[2])
		switch t, flags := http2.FrameType(frames[3]), http2.Flags(frames[4]); {
		case t == http2.FrameHeaders, t == http2.FrameContinuation, t == http2.FrameRSTStream,
			t == http2.FrameData && flags.Has(http2.FlagDataEndStream):
			return true
		}
		frames = frames[min(len(frames), 9+n):]
	}
	return false
}

// seedFrames returns frame sequences to start FuzzFramesBothPaths from:
// well formed ones, and ones with each error the fast path may meet.
func seedFrames(t testing.TB) [][]byte {
	msg, err := proto.Marshal(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: []byte{1, 2, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	grpcMsg := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
	var out [][]byte
	for _, write := range []func(fr *http2.Framer){
		func(fr *http2.Framer) { // requests, credit, the end
			fr.WriteData(1, false, append(append(slices.Clone(grpcMsg), grpcMsg...), grpcMsg[:4]...))
			fr.WriteWindowUpdate(0, 100)
			fr.WriteDataPadded(1, false, grpcMsg[4:], make([]byte, 7))
			fr.WriteWindowUpdate(1, 100)
			fr.WriteData(1, true, grpcMsg)
		},
		func(fr *http2.Framer) { fr.WriteRawFrame(http2.FrameData, http2.FlagDataPadded, 1, []byte{9, 1, 2}) },
		func(fr *http2.Framer) { fr.WriteWindowUpdate(0, 0) },
		func(fr *http2.Framer) { fr.WriteWindowUpdate(1, 0); fr.WriteData(1, true, grpcMsg) },
		func(fr *http2.Framer) { fr.WriteWindowUpdate(0, 1<<31-1) },
		func(fr *http2.Framer) { fr.WriteData(3, false, grpcMsg) },
		func(fr *http2.Framer) { fr.WriteData(0, false, grpcMsg) },
		func(fr *http2.Framer) { fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 1}) },
		func(fr *http2.Framer) { fr.WriteData(1, false, append([]byte{1}, grpcMsg[1:]...)) }, // compressed
		func(fr *http2.Framer) {
			fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersPadded, 3, []byte{200, 1, 2})
			fr.WriteWindowUpdate(0, 1000)
		},
		func(fr *http2.Framer) { fr.WriteRSTStream(1, http2.ErrCodeCancel); fr.WriteData(1, false, grpcMsg) },
		func(fr *http2.Framer) {
			fr.WritePing(false, [8]byte{})
			fr.WriteSettings()
			fr.WriteData(1, true, grpcMsg)
		},
		func(fr *http2.Framer) { // grpc-go's bandwidth probe after each response, and its answer to ours
			fr.WriteData(1, false, grpcMsg)
			fr.WritePing(false, [8]byte{1, 2, 3})
			fr.WritePing(true, [8]byte{4})
			fr.WriteData(1, false, grpcMsg)
			fr.WritePing(false, [8]byte{5})
		},
		func(fr *http2.Framer) { // messages cut into frames, which the fast path joins
			two := append(slices.Clone(grpcMsg), grpcMsg...)
			fr.WriteData(1, false, two[:3])
			fr.WriteData(1, false, two[3:9])
			fr.WriteData(1, false, two[9:])
			fr.WriteData(1, false, grpcMsg[:2])
			fr.WriteDataPadded(1, false, grpcMsg[2:6], make([]byte, 3))
			fr.WriteData(1, false, grpcMsg[6:])
			fr.WriteData(1, false, grpcMsg[:5])
			fr.WriteData(3, false, grpcMsg)
			fr.WriteData(1, true, grpcMsg[5:])
		},
		func(fr *http2.Framer) { fr.WriteRawFrame(http2.FramePing, 0, 1, make([]byte, 8)) }, // not on stream 0
		func(fr *http2.Framer) { fr.WriteRawFrame(http2.FramePing, 0, 0, make([]byte, 7)) }, // not 8 bytes
	} {
		var w bytes.Buffer
		fr := http2.NewFramer(&w, nil)
		fr.AllowIllegalWrites = true
		write(fr)
		out = append(out, w.Bytes())
	}
	return out
}

// grpcMessage returns a request of body bytes as a gRPC message: prefix
// and encoded request.
func grpcMessage(t *testing.T, body int) []byte {
	b, err := proto.Marshal(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, body)}})
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
}

// TestBurstBeforeSettings: a client may send up to 65,535 bytes on a
// stream before it has seen the server's SETTINGS (RFC 9113 6.9.2), even
// if they lower the window: frames that a read holds together are taken as
// they are one by one, with credit between them, on both paths. A first
// request, handled, has the server wait at a frame boundary, where the
// frames that come are handled inside its reads.
func TestBurstBeforeSettings(t *testing.T) {
	opts := h2grpc.Options{InitialWindowSize: 32 << 10}
	takeAll := func(int) bool { return true }
	insideSvc := &inlineService{seen: make(chan struct{}, 16), takes: takeAll}
	_, inside := serve(t, opts, insideSvc)
	loopSvc := &inlineService{seen: make(chan struct{}, 16), takes: takeAll}
	pull := h2grpc.NewServer(opts)
	h2grpc.PullOnly(pull)
	loopOnly := serveOn(t, pull, loopSvc)
	var first, burst bytes.Buffer
	http2.NewFramer(&first, nil).WriteData(1, false, grpcMessage(t, 1))
	msg := grpcMessage(t, 48<<10-20)
	fr := http2.NewFramer(&burst, nil)
	for off := 0; off < len(msg); off += 16 << 10 {
		end := min(off+16<<10, len(msg))
		fr.WriteData(1, end == len(msg), msg[off:end])
	}
	for _, server := range []struct {
		name, addr string
		svc        *inlineService
	}{{"inside reads", inside, insideSvc}, {"read loop only", loopOnly, loopSvc}} {
		nc, _ := openCall(t, server.addr)
		if _, err := nc.Write(first.Bytes()); err != nil {
			t.Fatal(err)
		}
		server.svc.waitFor(t, 1)
		if _, err := nc.Write(burst.Bytes()); err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(10 * time.Second)) // a reset stream has no trailers
		if got := readStatus(nc); got != "0" {
			t.Errorf("%s: grpc-status %q, want 0", server.name, got)
		}
	}
}

// TestRequestBeforeFrameCutShort: a request whose frames are whole is
// handled while the stream's next frame is only begun: the reader waits
// for the rest of a frame to join it only to frames that end no request.
// A first request, handled, has the server wait at a frame boundary.
func TestRequestBeforeFrameCutShort(t *testing.T) {
	svc := &inlineService{seen: make(chan struct{}, 16), takes: func(int) bool { return true }}
	_, addr := serve(t, h2grpc.Options{}, svc)
	nc, _ := openCall(t, addr)
	m0, m1, m2 := grpcMessage(t, 1), grpcMessage(t, 300), grpcMessage(t, 100)
	var first, w bytes.Buffer
	http2.NewFramer(&first, nil).WriteData(1, false, m0)
	if _, err := nc.Write(first.Bytes()); err != nil {
		t.Fatal(err)
	}
	svc.waitFor(t, 1)
	fr := http2.NewFramer(&w, nil)
	fr.WriteData(1, false, m1[:100])
	fr.WriteData(1, false, m1[100:])
	fr.WriteData(1, false, m2)
	b := w.Bytes()
	if _, err := nc.Write(b[:len(b)-10]); err != nil {
		t.Fatal(err)
	}
	svc.waitFor(t, 2)
	if _, err := nc.Write(b[len(b)-10:]); err != nil {
		t.Fatal(err)
	}
	svc.waitFor(t, 3)
}
