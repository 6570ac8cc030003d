package h2grpc_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/xdsd/xdsd/h2grpc"
)

// creditTracker reads a connection's frames from the server on a
// goroutine of its own and keeps the windows the server gives the client
// to send in: the connection's and each stream's.
type creditTracker struct {
	mu       sync.Mutex
	conn     int64            // the connection's window
	streams  map[uint32]int64 // each stream's window, past the initial one
	initial  int64            // the server's SETTINGS_INITIAL_WINDOW_SIZE, once read
	settings chan struct{}    // closed once the server's SETTINGS are read
	pongs    chan [8]byte     // answers to the client's PINGs
	err      error            // why reading ended
	done     chan struct{}    // closed when reading ends
	// frame, if set, is called with each frame read, under mu.
	frame func(http2.Frame)
}

func trackCredit(fr *http2.Framer, frame func(http2.Frame)) *creditTracker {
	ct := &creditTracker{conn: 65535, streams: map[uint32]int64{}, settings: make(chan struct{}),
		pongs: make(chan [8]byte, 16), done: make(chan struct{}), frame: frame}
	go func() {
		defer close(ct.done)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				ct.mu.Lock()
				ct.err = err
				ct.mu.Unlock()
				return
			}
			ct.mu.Lock()
			if ct.frame != nil {
				ct.frame(f)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() && ct.initial == 0 {
					v, ok := f.Value(http2.SettingInitialWindowSize)
					if !ok {
						v = 65535
					}
					ct.initial = int64(v)
					close(ct.settings)
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					ct.conn += int64(f.Increment)
				} else {
					ct.streams[f.StreamID] += int64(f.Increment)
				}
			case *http2.PingFrame:
				if f.IsAck() {
					ct.pongs <- f.Data
				}
			}
			ct.mu.Unlock()
		}
	}()
	return ct
}

// take takes n bytes of window on stream id, if both windows have them.
func (ct *creditTracker) take(id uint32, n int64) bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.conn < n || ct.initial+ct.streams[id] < n {
		return false
	}
	ct.conn -= n
	ct.streams[id] -= n
	return true
}

// sync sends a PING and waits for its answer: the server has then handled
// every frame sent before it, and the credit it gave for them is counted.
func (ct *creditTracker) sync(t *testing.T, fr *http2.Framer, n byte) {
	t.Helper()
	if err := fr.WritePing(false, [8]byte{0xee, n}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case d := <-ct.pongs:
			if d == [8]byte{0xee, n} {
				return
			}
		case <-ct.done:
			t.Fatalf("the connection ended: %v", ct.err)
		}
	}
}

// TestNonReadingClientHeldToBound: a client that opens streams whose
// handlers wait to send (it gives them no window), and sends request
// after request on each without reading a response, is let in no more
// than the connection's queue bound and a window: the server stops
// crediting back what its handlers have not taken.
func TestNonReadingClientHeldToBound(t *testing.T) {
	const (
		streams   = 40
		window    = 64 << 10
		connWin   = 256 << 10
		maxQueued = 256 << 10
	)
	s, addr := serve(t, h2grpc.Options{InitialWindowSize: window, InitialConnWindowSize: connWin, MaxConnQueuedBytes: maxQueued, MinPingInterval: -1},
		&service{ended: make(chan error, streams)})
	nc, fr := dialFramer(t, addr, windows(0))
	ct := trackCredit(fr, nil)
	<-ct.settings
	for i := range streams {
		startDuplex(t, fr, uint32(2*i+1), 1) // its handler waits to send a response of a byte
	}
	waitSenders(t, s, streams)
	first := len(grpcMsg(t, &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}}))
	for i := range streams { // the requests startDuplex sent
		if !ct.take(uint32(2*i+1), int64(first)) {
			t.Fatal("no window for the first requests")
		}
	}
	req := grpcMsg(t, &testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, 16000)}})
	sent := 0
	for round := byte(0); ; round++ {
		before := sent
		for progress := true; progress; {
			progress = false
			for i := range streams {
				id := uint32(2*i + 1)
				if !ct.take(id, int64(len(req))) {
					continue
				}
				if err := fr.WriteData(id, false, req); err != nil {
					t.Fatal(err)
				}
				sent += len(req)
				progress = true
			}
		}
		ct.sync(t, fr, round)
		if sent == before { // the server credits no more
			break
		}
		if sent > 10*(maxQueued+connWin) {
			t.Fatalf("the server let in %d bytes of requests its handlers did not take, want at most about %d", sent, maxQueued+connWin)
		}
	}
	if held := h2grpc.HeldBytes(s); held > maxQueued+connWin+streams*1024 {
		t.Errorf("the server holds %d bytes of requests, want at most %d", held, maxQueued+connWin+streams*1024)
	}
	if limit := maxQueued + connWin + 2*len(req); sent > limit {
		t.Errorf("the server let in %d bytes of requests its handlers did not take, want at most %d", sent, limit)
	}
	nc.Close()
	<-ct.done
}

// heapLive returns the bytes of heap the last garbage collection found
// live.
func heapLive() uint64 {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// TestLargeRequestsMemoryFreedWhenClientGoes: what a client's large
// requests took, being assembled on many streams at once, is garbage once
// it has gone: at the first collection after, the heap is back near where
// it was, with no buffer of theirs kept in a pool.
func TestLargeRequestsMemoryFreedWhenClientGoes(t *testing.T) {
	const (
		streams = 16
		size    = 3 << 19 // 1.5 MiB
		slack   = 8 << 20
	)
	msg := grpcMsg(t, &testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, size)}})
	s, addr := serve(t, h2grpc.Options{InitialWindowSize: 1 << 30, InitialConnWindowSize: 1 << 30}, &service{})
	runtime.GC()
	runtime.GC()
	base := heapLive()
	nc, fr := dialFramer(t, addr)
	for i := range streams {
		writeCallHeaders(fr, uint32(2*i+1), "/grpc.testing.TestService/StreamingInputCall")
	}
	for at := 0; at < len(msg); at += 16 << 10 { // every message begun before any ends
		end := min(at+16<<10, len(msg))
		for i := range streams {
			if err := fr.WriteData(uint32(2*i+1), end == len(msg), msg[at:end]); err != nil {
				t.Fatal(err)
			}
		}
	}
	answered := 0
	readFrames(t, fr, "the calls' trailers", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			t.Fatalf("%v", f)
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				answered++
			}
		}
		return answered == streams
	})
	nc.Close()
	waitUntil(t, func() (bool, string) {
		n := h2grpc.OpenConns(s)
		return n == 0, fmt.Sprintf("%d connections open", n)
	})
	runtime.GC()
	if live := heapLive(); live > base+slack {
		t.Errorf("after the client has gone and a collection, %d MiB of heap live, want at most %d (%d before it came, and %d)",
			live>>20, (base+slack)>>20, base>>20, slack>>20)
	}
	runtime.KeepAlive(msg)
}

// settingsAnswers writes n SETTINGS frames after the first (dialFramer's)
// in one write, then a PING, and reads the server's frames until the
// PING's answer or a GOAWAY; it returns the SETTINGS answers read and the
// GOAWAY, if any.
func settingsAnswers(t *testing.T, addr string, n int) (acks int, away *http2.GoAwayFrame) {
	t.Helper()
	nc, fr := dialFramer(t, addr)
	var b bytes.Buffer
	wfr := http2.NewFramer(&b, nil)
	for i := range n {
		wfr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(65535 + i)})
	}
	wfr.WritePing(false, [8]byte{1})
	nc.Write(b.Bytes()) // the server may close before it has read all: the answers tell
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d SETTINGS answers, neither GOAWAY nor the PING's answer: %v", acks, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				acks++
			}
		case *http2.GoAwayFrame:
			return acks, f
		case *http2.PingFrame:
			if f.IsAck() {
				return acks, nil
			}
		}
	}
}

// TestSettingsFlood: a client that sends more SETTINGS frames at once than
// the server takes gets those it takes answered, then GOAWAY
// ENHANCE_YOUR_CALM "too_many_settings"; one that sends a few dozen at
// once, as a client growing its windows might, is answered and served.
func TestSettingsFlood(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{MinPingInterval: -1})
	acks, away := settingsAnswers(t, addr, 50)
	if away != nil || acks != 51 {
		t.Fatalf("51 SETTINGS: %d answers, GOAWAY %v; want 51 answers and the PING's", acks, away)
	}
	acks, away = settingsAnswers(t, addr, 150)
	if away == nil || away.ErrCode != http2.ErrCodeEnhanceYourCalm || string(away.DebugData()) != "too_many_settings" {
		t.Fatalf("151 SETTINGS at once: %d answers, GOAWAY %v; want GOAWAY ENHANCE_YOUR_CALM too_many_settings", acks, away)
	}
	if acks < 100 || acks > 110 {
		t.Errorf("151 SETTINGS at once: %d answered before the GOAWAY, want about 100", acks)
	}
	c := dial(t, addr)
	if _, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{ResponseSize: 1}); err != nil {
		t.Fatalf("another client is not served: %v", err)
	}
}

// TestNothingAfterClientReset: a client that opens streams and resets
// them while their handlers wait for a request (the server has nothing in
// flight on them) is sent nothing on them after: no trailers, no
// RST_STREAM, as no frame may follow RST_STREAM on a stream (RFC 9113
// §5.1), however the handler's end races the reset.
func TestNothingAfterClientReset(t *testing.T) {
	const rounds, streams = 4, 250
	s, addr := serve(t, h2grpc.Options{MinPingInterval: -1}, &service{ended: make(chan error, rounds*streams)})
	_, fr := dialFramer(t, addr)
	var bad []string
	ct := trackCredit(fr, func(f http2.Frame) {
		switch f.(type) {
		case *http2.MetaHeadersFrame, *http2.DataFrame, *http2.RSTStreamFrame:
			bad = append(bad, fmt.Sprintf("%T on stream %d", f, f.Header().StreamID))
		}
	})
	id := uint32(1)
	for round := range rounds {
		for i := range streams {
			writeCallHeaders(fr, id+2*uint32(i), "/grpc.testing.TestService/FullDuplexCall")
		}
		for i := range streams {
			if err := fr.WriteRSTStream(id+2*uint32(i), http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
		}
		id += 2 * streams
		waitUntil(t, func() (bool, string) {
			n := h2grpc.OpenStreams(s)
			return n == 0, fmt.Sprintf("%d streams open", n)
		})
		ct.sync(t, fr, byte(round)) // what the server wrote for them is read
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("%d frames after the client's RST_STREAM, the first %v", len(bad), bad[:min(len(bad), 5)])
	}
}

// TestConcurrentLargeRequests: 32 requests of 3.9 MB at once on one
// connection are all served by default; with a lower
// MaxConnAssemblingBytes, messages that would pass it fail their streams
// with RESOURCE_EXHAUSTED, and are counted.
func TestConcurrentLargeRequests(t *testing.T) {
	s, _, addr := start(t, h2grpc.Options{})
	c := dial(t, addr)
	const calls = 32
	errs := make(chan error, calls)
	body := make([]byte, 3_900_000)
	for range calls {
		go func() {
			_, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: body}})
			errs <- err
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Errorf("a request of 3.9 MB, among %d at once: %v", calls, err)
		}
	}
	if st := s.Stats(); st.AssemblingRefused != 0 {
		t.Errorf("%d messages counted as refused, want none", st.AssemblingRefused)
	}

	// Three messages of 4 MiB begun at once, 1.5 MiB each sent, against
	// a bound of 4 MiB: the third does not fit.
	logs := &records{}
	s, addr = serve(t, h2grpc.Options{MaxConnAssemblingBytes: 4 << 20, InitialWindowSize: 1 << 30, InitialConnWindowSize: 1 << 30,
		Logger: slog.New(logs)}, &service{})
	_, fr := dialFramer(t, addr)
	msg := grpcMsg(t, &testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, 4<<20-100)}})
	for id := uint32(1); id <= 5; id += 2 {
		writeCallHeaders(fr, id, "/grpc.testing.TestService/StreamingInputCall")
	}
	for at := 0; at < 3<<19; at += 16 << 10 {
		for id := uint32(1); id <= 5; id += 2 {
			if err := fr.WriteData(id, false, msg[at:at+16<<10]); err != nil {
				t.Fatal(err)
			}
		}
	}
	readFrames(t, fr, "a stream refused", func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		if !ok || !h.StreamEnded() {
			return false
		}
		if got := h.PseudoValue("status"); got != "200" || headerValue(h, "grpc-status") != "8" {
			t.Fatalf("stream %d ended with :status %s, grpc-status %s, want RESOURCE_EXHAUSTED (8)", h.StreamID, got, headerValue(h, "grpc-status"))
		}
		return true
	})
	if st := s.Stats(); st.AssemblingRefused != 1 {
		t.Errorf("%d messages counted as refused, want 1", st.AssemblingRefused)
	}
	if w := logs.warnings(); len(w) != 1 || !strings.Contains(w[0]["msg"], "MaxConnAssemblingBytes") {
		t.Errorf("warnings %v, want one of the message refused", w)
	}
}

// headerValue returns the value of field name in f, or "".
func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// TestStreamAndMessageRefusalsCounted: a stream past MaxConcurrentStreams
// is refused with REFUSED_STREAM, a message larger than MaxRecvMsgSize
// fails its stream with RESOURCE_EXHAUSTED, and Stats counts each.
func TestStreamAndMessageRefusalsCounted(t *testing.T) {
	s, addr := serve(t, h2grpc.Options{MaxConcurrentStreams: 2, MaxRecvMsgSize: 1 << 10, Logger: slog.New(&records{})}, &service{})
	_, fr := dialFramer(t, addr)
	for _, id := range []uint32{1, 3, 5} {
		writeCallHeaders(fr, id, "/grpc.testing.TestService/StreamingInputCall")
	}
	fr.WriteData(1, false, []byte{0, 0, 0, 8, 0}) // a message of 2 KiB
	refused, failed := false, false
	readFrames(t, fr, "a stream refused and one failed", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			refused = refused || f.StreamID == 5 && f.ErrCode == http2.ErrCodeRefusedStream
		case *http2.MetaHeadersFrame:
			failed = failed || f.StreamID == 1 && headerValue(f, "grpc-status") == "8"
		}
		return refused && failed
	})
	if st := s.Stats(); st.StreamsRefused != 1 || st.MessagesTooLarge != 1 {
		t.Errorf("Stats %+v, want a stream refused and a message too large", st)
	}
}
