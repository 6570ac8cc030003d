package h2grpc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/net/http2"
)

// TestJoinData checks which DATA frames joinData joins to the first of b,
// that the payload it returns is the frames' payloads in order, and when it
// has the reader wait for the rest of a frame, leaving b as it was.
func TestJoinData(t *testing.T) {
	type frame struct {
		typ    http2.FrameType
		stream uint32
		flags  http2.Flags
		size   int
	}
	data := func(stream uint32, size int) frame { return frame{http2.FrameData, stream, 0, size} }
	end := func(f frame) frame { f.flags |= http2.FlagDataEndStream; return f }
	padded := func(f frame) frame { f.flags |= http2.FlagDataPadded; return f }
	three := []frame{data(1, 100), data(1, 50), data(1, 40)}
	for name, tc := range map[string]struct {
		frames    []frame
		window    int32 // the connection's receive window, if not 0
		streamWin int32 // the stream's, if not 0
		cut       int   // bytes missing from the end of b
		joined    int   // frames joined, the first included
		wait      bool  // the reader is to wait for the rest of the frame cut short
		noStream  bool  // stream 1 is not open
		queued    int   // bytes the stream has queued for its handler
		// The stream's message: msgLeft bytes of one begun before, or one
		// of msgSize bytes that the first frame begins, or prefixN bytes
		// of a message's prefix; none: the first frame's bytes are no
		// prefix this server accepts.
		msgLeft, msgSize, prefixN int
	}{
		"a message cut in three":       {frames: []frame{data(1, maxFrameSize), data(1, maxFrameSize), data(1, 900)}, joined: 3},
		"up to the stream's end":       {frames: []frame{data(1, 100), end(data(1, 50)), data(1, 10)}, joined: 2},
		"not after the stream's end":   {frames: []frame{end(data(1, 100)), data(1, 50)}, joined: 1},
		"not a padded frame":           {frames: []frame{data(1, 100), padded(data(1, 50))}, joined: 1},
		"not to a padded frame":        {frames: []frame{padded(data(1, 100)), data(1, 50)}, joined: 1},
		"not another stream's":         {frames: []frame{data(1, 100), data(3, 50), data(1, 10)}, joined: 1},
		"not on a stream not open":     {frames: three, noStream: true, joined: 1},
		"not past another frame":       {frames: []frame{data(1, 100), {http2.FrameWindowUpdate, 0, 0, 4}, data(1, 10)}, joined: 1},
		"not past the window":          {frames: three, window: 189, joined: 2},
		"up to the window":             {frames: three, window: 190, joined: 3},
		"not past the stream's window": {frames: three, streamWin: 189, joined: 2},
		"up to the stream's window":    {frames: three, streamWin: 190, joined: 3},
		"not past a queue of a window": {frames: three, queued: 1<<30 - 189, joined: 2},
		"up to a queue of a window":    {frames: three, queued: 1<<30 - 190, joined: 3},
		"not a frame over the limit":   {frames: []frame{data(1, 100), data(1, maxFrameSize+1)}, joined: 1},
		"empty frames":                 {frames: []frame{data(1, 10), data(1, 0), data(1, 5)}, joined: 3},

		"waits for a frame cut short, in a message":   {frames: three, cut: 1, msgLeft: 151, wait: true},
		"not if a message ends before it":             {frames: three, cut: 1, msgLeft: 150, joined: 2},
		"waits if a message begun goes on":            {frames: three, cut: 1, msgSize: 146, wait: true},
		"not if a message begun ends before it":       {frames: three, cut: 1, msgSize: 145, joined: 2},
		"not for a message too large":                 {frames: three, cut: 1, msgSize: 1<<20 + 1, joined: 2},
		"not if a prefix was begun":                   {frames: three, cut: 1, prefixN: 2, joined: 2},
		"not for a first frame shorter than a prefix": {frames: []frame{data(1, 3), data(1, 50)}, cut: 1, joined: 1},
		"not for another stream's":                    {frames: []frame{data(1, 100), data(3, 50)}, cut: 1, msgLeft: 1000, joined: 1},
		"not for a header cut short":                  {frames: three, cut: 40 + 5, msgLeft: 1000, joined: 2},
		"not past a read buffer": {frames: []frame{data(1, maxFrameSize), data(1, maxFrameSize), data(1, maxFrameSize),
			data(1, maxFrameSize), data(1, 10)}, cut: 1, msgLeft: 1 << 20, joined: 4},
	} {
		t.Run(name, func(t *testing.T) {
			var w bytes.Buffer
			var want []byte
			fr := http2.NewFramer(&w, nil)
			fr.AllowIllegalWrites = true
			frameEnd := 0 // of the last frame joined
			for i, f := range tc.frames {
				payload := make([]byte, f.size)
				for j := range payload {
					payload[j] = byte(i*7 + j)
				}
				if i == 0 && tc.msgSize > 0 { // a message's prefix
					payload[0] = 0
					binary.BigEndian.PutUint32(payload[1:], uint32(tc.msgSize))
				}
				if err := fr.WriteRawFrame(f.typ, f.flags, f.stream, payload); err != nil {
					t.Fatal(err)
				}
				if i < tc.joined {
					want = append(want, payload...)
					frameEnd = w.Len()
				}
			}
			b := w.Bytes()[:w.Len()-tc.cut]
			c := &conn{srv: &Server{opts: Options{MaxRecvMsgSize: 1 << 20, InitialWindowSize: 1 << 30}.withDefaults()}}
			c.recvWin.Store(orDefault(tc.window, 1<<30))
			if !tc.noStream {
				st := &stream{c: c, id: 1, recvWin: orDefault(tc.streamWin, 1<<30), prefixN: tc.prefixN, queued: tc.queued}
				if tc.msgLeft > 0 {
					msg := make([]byte, tc.msgLeft+7)
					st.msg, st.msgN, st.msgSize = &msg, 7, len(msg)
				}
				c.streams = map[uint32]*stream{1: st}
			}
			first := tc.frames[0]
			fh := http2.FrameHeader{Type: http2.FrameData, Flags: first.flags, StreamID: first.stream, Length: uint32(first.size)}
			before := bytes.Clone(b)
			next, got, gotFH, wait := c.joinData(b, 0, fh)
			if wait != tc.wait {
				t.Fatalf("wait %v, want %v", wait, tc.wait)
			}
			if wait {
				if next != len(b)+tc.cut || !bytes.Equal(b, before) {
					t.Fatalf("waiting for bytes up to %d, want %d; b changed: %v", next, len(b)+tc.cut, !bytes.Equal(b, before))
				}
				return
			}
			if next != frameEnd || !bytes.Equal(got, want) || int(gotFH.Length) != len(want) {
				t.Fatalf("joined up to %d, %d bytes, header length %d; want up to %d, %d bytes (payloads equal: %v)",
					next, len(got), gotFH.Length, frameEnd, len(want), bytes.Equal(got, want))
			}
			if wantEnd := tc.frames[tc.joined-1].flags.Has(http2.FlagDataEndStream); gotFH.Flags.Has(http2.FlagDataEndStream) != wantEnd {
				t.Errorf("END_STREAM %v, want %v", gotFH.Flags.Has(http2.FlagDataEndStream), wantEnd)
			}
		})
	}
}

// orDefault returns v, or def if v is 0.
func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}
