package h2grpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// discardWriter takes whatever the server writes (its WINDOW_UPDATEs).
type discardWriter struct{}

func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// queueingConn returns a connection with stream 1 open, its window w, and
// no handler reading: every message queues.
func queueingConn(w int32) (*conn, *stream) {
	c := &conn{ready: true, w: discardWriter{},
		srv: &Server{opts: Options{InitialWindowSize: w, InitialConnWindowSize: 1 << 20, MaxRecvMsgSize: 1 << 20}.withDefaults()}}
	c.recvWin.Store(1 << 20)
	st := &stream{c: c, id: 1, recvWin: w, ready: make(chan struct{}, 1)}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	c.streams = map[uint32]*stream{1: st}
	return c, st
}

// burstFails reports whether DATA frames of whole messages of the given
// sizes (prefix included) fail stream 1's flow control, handled one by one
// or joined (all in one buffer), on a stream whose window is w.
func burstFails(t *testing.T, w int32, sizes []int, joined bool) bool {
	var frames [][]byte
	for _, n := range sizes {
		var b bytes.Buffer
		p := make([]byte, n)
		binary.BigEndian.PutUint32(p[1:], uint32(n-5))
		http2.NewFramer(&b, nil).WriteData(1, false, p)
		frames = append(frames, b.Bytes())
	}
	if joined {
		frames = [][]byte{bytes.Join(frames, nil)}
	}
	c, st := queueingConn(w)
	defer st.cancel()
	for _, f := range frames {
		if used, _, err := c.handleWhole(f); err != nil || used != len(f) {
			t.Fatalf("handleWhole used %d of %d bytes: %v", used, len(f), err)
		}
	}
	return st.rerr != nil
}

// TestJoinedBurstsPassAsOneByOne: bursts a client may send before it has
// seen the server's SETTINGS (up to 65,535 bytes, RFC 9113 6.9.2), against
// a smaller stream window, with the handler behind: a burst that passes
// frame by frame passes joined, whatever credit frame by frame would have
// given partway.
func TestJoinedBurstsPassAsOneByOne(t *testing.T) {
	const w = 32 << 10
	cases := [][]int{{8192, 5728, 4096, 6581, 8192, 12288, 8192, 10262}} // the reviewer's
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var sizes []int
		for total := 0; ; {
			n := 5 + rnd.IntN(maxFrameSize-5+1)
			if rnd.IntN(2) == 0 {
				n = []int{4096, 8192, 12288, maxFrameSize}[rnd.IntN(4)]
			}
			if total+n > 65535 {
				break
			}
			sizes = append(sizes, n)
			total += n
		}
		cases = append(cases, sizes)
	}
	for _, sizes := range cases {
		if burstFails(t, w, sizes, true) && !burstFails(t, w, sizes, false) {
			t.Fatalf("frames of %v: fail joined, pass one by one", sizes)
		}
	}
}

// TestHandleWholeNeeds checks what handleWhole says it needs before it can
// go on, which the reader waits for before it runs it again.
func TestHandleWholeNeeds(t *testing.T) {
	frame := func(typ http2.FrameType, stream uint32, size int) []byte {
		var b bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		fr.AllowIllegalWrites = true
		fr.WriteRawFrame(typ, 0, stream, make([]byte, size))
		return b.Bytes()
	}
	big := frame(http2.FrameData, 1, 1000)
	for name, tc := range map[string]struct {
		b          []byte
		headerOpen bool
		msgLeft    int // stream 1 is in a message, with this much of it to come
		used, need int
	}{
		"nothing":                   {b: nil, need: frameHeaderLen},
		"part of a header":          {b: big[:5], need: frameHeaderLen},
		"part of a frame":           {b: big[:500], need: len(big)},
		"a frame over the limit":    {b: frame(http2.FrameData, 1, maxFrameSize+1)[:frameHeaderLen]},
		"a frame for the read loop": {b: frame(http2.FrameHeaders, 3, 10)},
		"inside a header block":     {b: big[:5], headerOpen: true},
		"frames waiting to join": {b: append(frame(http2.FrameData, 1, 100), big[:500]...), msgLeft: 5000,
			need: frameHeaderLen + 100 + len(big)},
	} {
		t.Run(name, func(t *testing.T) {
			c, st := queueingConn(1 << 20)
			defer st.cancel()
			c.hb.open = tc.headerOpen
			if tc.msgLeft > 0 {
				msg := make([]byte, tc.msgLeft)
				st.msg, st.msgSize = &msg, tc.msgLeft
			}
			used, need, err := c.handleWhole(tc.b)
			if err != nil || used != tc.used || need != tc.need {
				t.Fatalf("used %d, need %d, %v; want used %d, need %d", used, need, err, tc.used, tc.need)
			}
		})
	}
}

// TestEmptyMessagesFillTheQueue: a client sending empty messages to a
// handler that takes none is credited back only as far as each costs
// queueEntryCost, and so runs out of window (a flow-control error here, as
// it sends on regardless) rather than queueing without bound.
func TestEmptyMessagesFillTheQueue(t *testing.T) {
	const w = 16 << 10
	sizes := make([]int, 4*w/5) // four windows' worth of 5-byte prefixes
	for i := range sizes {
		sizes[i] = 5
	}
	if !burstFails(t, w, sizes, false) {
		t.Fatal("empty messages queued without bound: credited back as if they cost nothing")
	}
}

// TestMessageBufferGrowsAsItsBytesCome: a prefix that claims a message of
// a megabyte reserves only msgFirstPart until its bytes come (a client
// sending such prefixes on 100 streams reserved 400 MB); the message,
// grown as they do, is received whole.
func TestMessageBufferGrowsAsItsBytesCome(t *testing.T) {
	c, st := queueingConn(1 << 30)
	defer st.cancel()
	const size = 1 << 20
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	st.rmu.Lock()
	defer st.rmu.Unlock()
	st.assembleLocked(binary.BigEndian.AppendUint32([]byte{0}, size))
	if st.msg == nil || cap(*st.msg) > msgFirstPart {
		t.Fatalf("after the prefix alone, a buffer of %d bytes, want at most %d", cap(*st.msg), msgFirstPart)
	}
	for rest := msg; len(rest) > 0; {
		n := min(len(rest), 10_000)
		st.assembleLocked(rest[:n])
		rest = rest[n:]
	}
	if len(st.queue) != 1 || !bytes.Equal(st.queue[0].ReadOnlyData(), msg) {
		t.Fatalf("%d messages queued, want the one sent", len(st.queue))
	}
	if n := c.assembling.Load(); n != 0 {
		t.Errorf("%d bytes counted as being assembled once the message is whole", n)
	}
	st.dropLocked()
}

// TestMessagesBeingAssembledBounded: a message that would take the
// connection's messages being assembled past MaxConnAssemblingBytes fails its
// stream with ResourceExhausted, and gives back what it held.
func TestMessagesBeingAssembledBounded(t *testing.T) {
	c, st := queueingConn(1 << 30)
	defer st.cancel()
	c.assembling.Store(c.srv.opts.MaxConnAssemblingBytes - 100<<10) // other streams' messages
	st.rmu.Lock()
	defer st.rmu.Unlock()
	st.assembleLocked(binary.BigEndian.AppendUint32([]byte{0}, 1<<20))
	st.assembleLocked(make([]byte, 200<<10))
	if status.Code(st.rerr) != codes.ResourceExhausted {
		t.Fatalf("stream error %v, want ResourceExhausted", st.rerr)
	}
	if n := c.assembling.Load(); n != c.srv.opts.MaxConnAssemblingBytes-100<<10 {
		t.Errorf("%d bytes counted as being assembled, want the other streams' %d", n, c.srv.opts.MaxConnAssemblingBytes-100<<10)
	}
}

// TestMessagesBeingAssembledCountCapacity: what counts against
// MaxConnAssemblingBytes is the capacity of the buffers messages are assembled in:
// a message of 600 KiB, larger than the pool's buffers, whole but for a
// byte, holds a buffer of its size, and gives it all back when dropped.
func TestMessagesBeingAssembledCountCapacity(t *testing.T) {
	const size = 600 << 10
	for _, room := range []int64{500 << 10, size} {
		c, st := queueingConn(1 << 30)
		base := c.srv.opts.MaxConnAssemblingBytes - room // other streams' messages
		c.assembling.Store(base)
		st.rmu.Lock()
		st.assembleLocked(binary.BigEndian.AppendUint32([]byte{0}, size))
		for sent := 0; sent < size-1 && st.rerr == nil; sent += 10_000 {
			st.assembleLocked(make([]byte, min(10_000, size-1-sent)))
		}
		fits := room >= size
		if (st.rerr == nil) != fits {
			t.Errorf("room for %d KiB: stream error %v, want one %v", room>>10, st.rerr, !fits)
		}
		if n := c.assembling.Load(); fits && n != base+size {
			t.Errorf("room for %d KiB: %d bytes counted as being assembled, want %d (the others' and 600 KiB)", room>>10, n, base+size)
		}
		st.dropLocked()
		if n := c.assembling.Load(); n != base {
			t.Errorf("room for %d KiB: %d bytes counted once the message is dropped, want the others' %d", room>>10, n, base)
		}
		st.rmu.Unlock()
		st.cancel()
	}
}
