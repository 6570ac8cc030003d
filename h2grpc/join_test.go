package h2grpc

import (
	"bytes"
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
	}{
		"a message cut in three":     {frames: []frame{data(1, maxFrameSize), data(1, maxFrameSize), data(1, 900)}, joined: 3},
		"up to the stream's end":     {frames: []frame{data(1, 100), end(data(1, 50)), data(1, 10)}, joined: 2},
		"not a padded frame":         {frames: []frame{data(1, 100), padded(data(1, 50))}, joined: 1},
		"not another stream's":       {frames: []frame{data(1, 100), data(3, 50), data(1, 10)}, joined: 1},
		"not past another frame":     {frames: []frame{data(1, 100), {http2.FrameWindowUpdate, 0, 0, 4}, data(1, 10)}, joined: 1},
		"not a frame cut short":      {frames: []frame{data(1, 100), data(1, 50), data(1, 40)}, cut: 1, joined: 2},
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
				if err := fr.WriteRawFrame(f.typ, f.flags, f.stream, payload); err != nil {
					t.Fatal(err)
				}
				if i < tc.joined {
					want = append(want, payload...)
					frameEnd = w.Len()
				}
			}
			b := w.Bytes()[:w.Len()-tc.cut]
			c := &conn{recvWin: tc.window}
			if c.recvWin == 0 {
				c.recvWin = 1 << 30
			}
			first := tc.frames[0]
			fh := http2.FrameHeader{Type: http2.FrameData, StreamID: first.stream, Length: uint32(first.size)}
			next, got, gotFH := c.joinData(b, frameHeaderLen+first.size, b[frameHeaderLen:frameHeaderLen+first.size], fh)
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
