package h2grpc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/net/http2"
)

// TestJoinData checks which DATA frames joinData joins to the first of b,
// and that the payloads it joins are the frames' payloads in order.
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
	for name, tc := range map[string]struct {
		frames []frame
		window int32 // the connection's receive window
		cut    int   // bytes missing from the end of b
		joined int   // frames joined, the first included
		wait   bool  // the reader is to wait for the rest of the frame cut short
		// The stream's message: msgLeft bytes of one begun before, or one
		// of msgSize bytes that the first frame begins; neither: no stream.
		msgLeft, msgSize int
	}{
		"a message cut in three":                    {frames: []frame{data(1, maxFrameSize), data(1, maxFrameSize), data(1, 900)}, joined: 3},
		"up to the stream's end":                    {frames: []frame{data(1, 100), end(data(1, 50)), data(1, 10)}, joined: 2},
		"not a padded frame":                        {frames: []frame{data(1, 100), padded(data(1, 50))}, joined: 1},
		"not another stream's":                      {frames: []frame{data(1, 100), data(3, 50), data(1, 10)}, joined: 1},
		"not past another frame":                    {frames: []frame{data(1, 100), {http2.FrameWindowUpdate, 0, 0, 4}, data(1, 10)}, joined: 1},
		"waits for a frame cut short, in a message": {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, cut: 1, msgLeft: 151, wait: true},
		"not if a message ends before it":           {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, cut: 1, msgLeft: 150, joined: 2},
		"waits if a message begun goes on":          {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, cut: 1, msgSize: 146, wait: true},
		"not if a message begun ends before it":     {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, cut: 1, msgSize: 145, joined: 2},
		"not for a message too large":               {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, cut: 1, msgSize: 1<<20 + 1, joined: 2},
		"not with no stream":                        {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, cut: 1, joined: 2},
		"not for another stream's":                  {frames: []frame{data(1, 100), data(3, 50)}, cut: 1, msgLeft: 1000, joined: 1},
		"not for a header cut short":                {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, cut: 40 + 5, msgLeft: 1000, joined: 2},
		"not past a read buffer": {frames: []frame{data(1, maxFrameSize), data(1, maxFrameSize), data(1, maxFrameSize),
			data(1, maxFrameSize), data(1, 10)}, cut: 1, msgLeft: 1 << 20, joined: 4},
		"not past the window":        {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, window: 189, joined: 2},
		"up to the window":           {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, window: 190, joined: 3},
		"not a frame over the limit": {frames: []frame{data(1, 100), data(1, maxFrameSize+1)}, joined: 1},
		"empty frames":               {frames: []frame{data(1, 10), data(1, 0), data(1, 5)}, joined: 3},
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
			c := &conn{recvWin: tc.window, srv: &Server{opts: Options{MaxRecvMsgSize: 1 << 20}}}
			if c.recvWin == 0 {
				c.recvWin = 1 << 30
			}
			if tc.msgLeft > 0 || tc.msgSize > 0 {
				st := &stream{c: c, id: 1}
				if tc.msgLeft > 0 {
					msg := make([]byte, tc.msgLeft+7)
					st.msg, st.msgN = &msg, 7
				}
				c.streams = map[uint32]*stream{1: st}
			}
			first := tc.frames[0]
			fh := http2.FrameHeader{Type: http2.FrameData, StreamID: first.stream, Length: uint32(first.size)}
			before := bytes.Clone(b)
			next, got, gotFH, wait := c.joinData(b, 0, fh)
			if wait != tc.wait {
				t.Fatalf("wait %v, want %v", wait, tc.wait)
			}
			if wait {
				if next != 0 || got != nil || !bytes.Equal(b, before) {
					t.Fatalf("waiting, joinData returned %d, %d bytes, and changed b: %v", next, len(got), !bytes.Equal(b, before))
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
