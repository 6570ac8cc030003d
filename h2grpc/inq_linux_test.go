//go:build linux && (amd64 || arm64)

package h2grpc

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInqReaderTellsWhatIsLeft checks the count a read with TCP_INQ
// returns: the bytes it left, none once it took them all, and one more
// than it left once the client's FIN has come, so that the reader reads on
// to the end rather than wait for data that will never come.
func TestInqReaderTellsWhatIsLeft(t *testing.T) {
	client, rc := socketPair(t)
	q := newInqReader(rc)
	if q == nil {
		t.Fatal("TCP_INQ was refused on a TCP socket")
	}
	read := func(size int) (n, left int) {
		t.Helper()
		var err error
		if cerr := rc.Read(func(fd uintptr) bool {
			n, left, err = q.read(fd, make([]byte, size))
			return !wouldBlock(err)
		}); cerr != nil || err != nil {
			t.Fatal(cerr, err)
		}
		return n, left
	}
	if _, err := client.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	waitPoll(t, rc, unix.POLLIN) // the 100 bytes, written at once, come at once
	if n, left := read(60); n != 60 || left != 40 {
		t.Fatalf("read %d bytes leaving %d, want 60 leaving 40", n, left)
	}
	if n, left := read(100); n != 40 || left != 0 {
		t.Fatalf("read %d bytes leaving %d, want 40 leaving 0", n, left)
	}

	if _, err := client.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	waitPoll(t, rc, unix.POLLRDHUP)
	if n, left := read(100); n != 10 || left == 0 {
		t.Fatalf("read %d bytes leaving %d with the FIN queued, want 10 leaving more than 0", n, left)
	}
	if n, _ := read(100); n != 0 {
		t.Fatalf("read %d bytes after the FIN, want the end (0)", n)
	}
}

// TestReaderSeesEndAfterWholeFrame checks that a client that ends a
// frame and closes at once, in one segment, is seen to end: the read that
// took the frame's end left nothing but the FIN, whose readiness it spent
// (the reader was waiting for the frame's end when both came), and the
// reader, told that something is left, reads on to the end instead of
// waiting for the socket again.
func TestReaderSeesEndAfterWholeFrame(t *testing.T) {
	client, rc := socketPair(t)
	const want = 100
	called := make(chan struct{}, 1)
	p := &pooledReader{rc: rc, inq: newInqReader(rc)}
	p.frames = func(b []byte) (int, int, error) {
		select {
		case called <- struct{}{}:
		default:
		}
		if len(b) < want {
			return 0, want, nil
		}
		return want, frameHeaderLen, nil // all used; then wants a header more
	}
	p.atBoundary()
	done := make(chan error, 1)
	go func() { _, err := p.Read(make([]byte, frameHeaderLen)); done <- err }()

	if _, err := client.Write(make([]byte, want/2)); err != nil {
		t.Fatal(err)
	}
	<-called // the reader has the frame's start, and waits in this fill for its end
	// Corked, the end and the FIN go in one segment: one readiness for both.
	cc, err := client.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := cc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if _, err := client.Write(make([]byte, want/2)); err != nil {
		t.Fatal(err)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("Read returned %v, want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		shutdown(rc)
		<-done
		t.Fatal("the reader missed the client's FIN that came with its frame's end")
	}
}

// waitPoll waits (in poll(2), up to 10 s) until the socket under rc has
// one of events.
func waitPoll(t *testing.T, rc syscall.RawConn, events int16) {
	t.Helper()
	var n int
	var err error
	fds := []unix.PollFd{{Events: events}}
	if cerr := rc.Control(func(fd uintptr) {
		fds[0].Fd = int32(fd)
		n, err = unix.Poll(fds, 10_000)
	}); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	if n == 0 || fds[0].Revents&events == 0 {
		t.Fatalf("poll(%#x) timed out", events)
	}
}

// shutdown ends the socket under rc, and so a reader stuck in it.
func shutdown(rc syscall.RawConn) {
	_ = rc.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
}
