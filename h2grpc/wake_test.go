package h2grpc_test

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/net/http2"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/h2grpc"
)

// wakeStreams is how many senders the tests below have waiting for window
// on one connection (a FullDuplexCall reports its end on a channel of 16).
const wakeStreams = 12

// TestStreamWindowUpdateWakesItsSenderOnly: with every stream's sender
// waiting for its stream's window, a WINDOW_UPDATE on one stream wakes its
// sender alone.
func TestStreamWindowUpdateWakesItsSenderOnly(t *testing.T) {
	s, _, addr := start(t, h2grpc.Options{})
	nc, fr := dialFramer(t, addr, windows(0))
	for i := range wakeStreams {
		startDuplex(t, fr, uint32(2*i+1), 100)
	}
	waitSenders(t, s, wakeStreams)
	before, _ := h2grpc.SendWaits(s)
	fr.WriteWindowUpdate(5, 1000)
	readData(t, fr, map[uint32]int{5: responseLen(100)})
	// The WINDOW_UPDATE's wakes were all counted before its DATA was sent.
	if woken, _ := h2grpc.SendWaits(s); woken-before != 1 {
		t.Errorf("a WINDOW_UPDATE on one stream woke %d senders, want its own alone", woken-before)
	}
	nc.Close()
}

// TestConnWindowUpdateWakesOneSender: with senders waiting for the
// connection's window, a client crediting it a byte at a time wakes one
// sender per WINDOW_UPDATE, not every sender; a large credit still
// reaches them all, each passing on the room it leaves.
func TestConnWindowUpdateWakesOneSender(t *testing.T) {
	s, _, addr := start(t, h2grpc.Options{})
	_, fr := dialFramer(t, addr, windows(1<<20))
	const first = 65535 // the connection's window, and more
	startDuplex(t, fr, 1, first)
	waitSenders(t, s, 1)
	want := map[uint32]int{1: responseLen(first)}
	for i := 1; i < wakeStreams; i++ {
		startDuplex(t, fr, uint32(2*i+1), 100)
		want[uint32(2*i+1)] = responseLen(100)
	}
	got := readData(t, fr, map[uint32]int{1: 65535})
	waitSenders(t, s, wakeStreams)
	before, _ := h2grpc.SendWaits(s)
	const credits = 10
	for range credits {
		fr.WriteWindowUpdate(0, 1)
		for id, n := range readData(t, fr, nil) { // a byte, on one stream
			got[id] += n
		}
		waitSenders(t, s, wakeStreams)
	}
	if woken, _ := h2grpc.SendWaits(s); woken-before > credits {
		t.Errorf("%d WINDOW_UPDATEs of a byte on the connection woke senders %d times, want one each", credits, woken-before)
	}
	fr.WriteWindowUpdate(0, 1<<20)
	for id, n := range want {
		want[id] = n - got[id]
	}
	readData(t, fr, want)
}

// windows is the setting of streams' windows (the server's to send in)
// to win.
func windows(win uint32) http2.Setting {
	return http2.Setting{ID: http2.SettingInitialWindowSize, Val: win}
}

// startDuplex starts a FullDuplexCall on stream id whose first request asks
// for a response of size bytes, and leaves the client's side open.
func startDuplex(t *testing.T, fr *http2.Framer, id uint32, size int32) {
	t.Helper()
	writeCallHeaders(fr, id, "/grpc.testing.TestService/FullDuplexCall")
	req := &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: size}}}
	if err := fr.WriteData(id, false, grpcMsg(t, req)); err != nil {
		t.Fatal(err)
	}
}

// responseLen is the DATA length of a FullDuplexCall's response of size
// bytes.
func responseLen(size int) int {
	return 5 + proto.Size(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, size)}})
}

// readData reads the server's frames until the DATA on each stream of want
// add up to its count at least, or, if want is nil, until a first DATA
// frame; it returns the DATA bytes read on each stream.
func readData(t *testing.T, fr *http2.Framer, want map[uint32]int) map[uint32]int {
	t.Helper()
	got := map[uint32]int{}
	readFrames(t, fr, "DATA", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.DataFrame:
			got[f.StreamID] += len(f.Data())
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			t.Fatalf("%v", f)
		}
		if want == nil {
			return len(got) > 0
		}
		for id, n := range want {
			if got[id] < n {
				return false
			}
		}
		return true
	})
	return got
}

// waitSenders waits until n senders of s wait for window.
func waitSenders(t *testing.T, s *h2grpc.Server, n int) {
	t.Helper()
	waitUntil(t, func() (bool, string) {
		_, waiting := h2grpc.SendWaits(s)
		return waiting == n, fmt.Sprintf("%d senders wait for window, want %d", waiting, n)
	})
}

// waitUntil polls cond until it holds, for 10 s at most; then the test
// fails with what cond last said.
func waitUntil(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal(last)
		}
	}
}

// TestConnLineBounded: a client that never credits the connection, and
// opens and resets streams whose senders wait for it, leaves the line of
// senders waiting for the connection's window no longer than a few dozen
// entries, though each reset stream left one.
func TestConnLineBounded(t *testing.T) {
	s, svc, addr := start(t, h2grpc.Options{})
	_, fr := dialFramer(t, addr, windows(1<<20))
	startDuplex(t, fr, 1, 65535) // takes the connection's window
	readData(t, fr, map[uint32]int{1: 65535})
	waitSenders(t, s, 1)
	const cycles = 300
	for i := range cycles {
		id := uint32(2*i + 3)
		startDuplex(t, fr, id, 100)
		waitSenders(t, s, 2)
		if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
		<-svc.ended // the reset call's handler returned
		waitSenders(t, s, 1)
	}
	if n := h2grpc.ConnLine(s); n > 64 {
		t.Fatalf("%d entries in the line after %d streams reset while waiting, want a few dozen at most", n, cycles)
	}
}
