//go:build unix

package h2grpc

import "testing"

// TestReaderStartsBigAfterALargeFrame checks the reader's choice of buffer:
// small at first; big for every read after a frame outgrew a small one (a
// client repeating a large node sends every request large); small again
// only after smallHolds big buffers in a row held no more than a small one
// would, so that a client alternating pings with large requests keeps big
// ones.
func TestReaderStartsBigAfterALargeFrame(t *testing.T) {
	p := &pooledReader{}
	hold := func(n int) int { // takes a buffer, reads n bytes into it, and gives it back
		t.Helper()
		p.takeBuf()
		size := len(*p.buf)
		if n > size {
			p.w = size
			size = len(p.grow())
		}
		p.filled, p.r, p.w = n, 0, 0
		p.release()
		if p.buf != nil {
			t.Fatal("the buffer was not given back")
		}
		return size
	}
	want := func(what string, got, size int) {
		t.Helper()
		if got != size {
			t.Fatalf("%s: a %d-byte buffer, want %d", what, got, size)
		}
	}
	want("first read", hold(100), readBufSize)
	want("a large frame", hold(30_000), bigReadBufSize)
	want("after it", hold(30_000), bigReadBufSize)
	for range 3 { // a ping, then a large request: the large one resets the count
		want("ping", hold(17), bigReadBufSize)
		want("large after ping", hold(30_000), bigReadBufSize)
	}
	for range smallHolds {
		want("small read", hold(readBufSize), bigReadBufSize)
	}
	want("after smallHolds small reads", hold(100), readBufSize)
}
