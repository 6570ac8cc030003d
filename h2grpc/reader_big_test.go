//go:build unix

package h2grpc

import (
	"bytes"
	"errors"
	"net"
	"syscall"
	"testing"
)

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
		want("a read of nothing (EAGAIN): not counted", hold(0), bigReadBufSize)
		want("small read", hold(readBufSize), bigReadBufSize)
	}
	want("after smallHolds small reads", hold(100), readBufSize)
}

// TestReaderStartsBigOverASocket drives the same choice through reads of a
// real socket, which count what each buffer held, and checks that every
// byte reaches frames in order whichever buffer it was read into.
func TestReaderStartsBigOverASocket(t *testing.T) {
	client, rc := socketPair(t)
	p := &pooledReader{rc: rc}
	errWhole := errors.New("the message is whole") // ends the Read
	var got []byte
	size, firstBuf := 0, 0
	p.frames = func(b []byte) (int, int, error) {
		if firstBuf == 0 {
			firstBuf = len(*p.buf)
		}
		if len(b) < size {
			return 0, size, nil // wait for the whole message
		}
		got = append(got[:0], b[:size]...)
		return size, 0, errWhole
	}
	round := func(n int) int { // the size of the buffer the first read of n bytes went to
		t.Helper()
		size, firstBuf = n, 0
		sent := make([]byte, n)
		for i := range sent {
			sent[i] = byte(i * 7)
		}
		if _, err := client.Write(sent); err != nil {
			t.Fatal(err)
		}
		p.atBoundary()
		var header [frameHeaderLen]byte
		if _, err := p.Read(header[:]); err != errWhole {
			t.Fatalf("Read: %v", err)
		}
		p.ferr = nil
		if !bytes.Equal(got, sent) {
			t.Fatalf("%d bytes: frames got other bytes", n)
		}
		if p.buf != nil {
			t.Fatal("the buffer was not given back")
		}
		return firstBuf
	}
	if got := round(30_000); got != readBufSize {
		t.Fatalf("first large message: read first into %d bytes, want %d", got, readBufSize)
	}
	for i := range 6 {
		if got := round(30_000); got != bigReadBufSize {
			t.Fatalf("large message #%d: read first into %d bytes, want %d", i+2, got, bigReadBufSize)
		}
	}
	for range smallHolds {
		round(100)
	}
	if got := round(100); got != readBufSize {
		t.Fatalf("after %d small messages: read first into %d bytes, want %d", smallHolds, got, readBufSize)
	}
}

// socketPair returns the two ends of a loopback TCP connection (tcpPair):
// the client's, and the server's raw socket.
func socketPair(t *testing.T) (net.Conn, syscall.RawConn) {
	t.Helper()
	client, server := tcpPair(t)
	rc, err := server.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return client, rc
}
