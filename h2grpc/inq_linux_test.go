//go:build linux && (amd64 || arm64)

package h2grpc

import (
	"errors"
	"io"
	"net"
	"os"
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

// guardedReader returns a connection's client side and the reader of its
// server side, set up as a connection's after its handshake (guardWith),
// with waits on a read's word bounded by recheck, and frames that say a
// frame is want bytes long and, once it has one, that it wants a header
// more. called gets a value (if it has room) at each call of frames.
func guardedReader(t *testing.T, recheck time.Duration, want int) (*net.TCPConn, *pooledReader, chan struct{}) {
	t.Helper()
	client, server := tcpPair(t)
	rc, err := server.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	p := &pooledReader{rc: rc, inq: newInqReader(rc)}
	p.guardWith(server.SetReadDeadline)
	if p.deadline == nil {
		t.Fatal("the reader's waits are not guarded")
	}
	p.recheck = recheck
	called := make(chan struct{}, 1)
	p.frames = func(b []byte) (int, int, error) {
		select {
		case called <- struct{}{}:
		default:
		}
		if len(b) < want {
			return 0, want, nil
		}
		return want, frameHeaderLen, nil
	}
	t.Cleanup(func() { shutdown(rc) })
	return client, p, called
}

// readFrame runs p.Read for a frame header (p at a boundary, so frames
// runs inside the read) and returns its error, or fails the test if it
// does not return within 10 s.
func readFrame(t *testing.T, p *pooledReader, start func()) error {
	t.Helper()
	p.atBoundary()
	done := make(chan error, 1)
	go func() { _, err := p.Read(make([]byte, frameHeaderLen)); done <- err }()
	if start != nil {
		start()
	}
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		_ = p.rc.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
		<-done
		t.Fatal("the reader is still waiting")
		return nil
	}
}

// cork holds back what c writes until it closes, so that its last write
// and its FIN (or the rest) go in one segment.
func cork(t *testing.T, c *net.TCPConn) {
	t.Helper()
	cc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := cc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
}

// TestReaderSeesEndAfterWholeFrame checks that a client that ends a
// frame and closes at once, in one segment, is seen to end at once: the
// read that took the frame's end left nothing but the FIN, whose readiness
// it spent (the reader was waiting for the frame's end when both came),
// and the reader, told that something is left, reads on to the end
// instead of waiting for the socket again (the wait's bound, an hour here,
// would end it much later).
func TestReaderSeesEndAfterWholeFrame(t *testing.T) {
	const want = 100
	client, p, called := guardedReader(t, time.Hour, want)
	err := readFrame(t, p, func() {
		if _, err := client.Write(make([]byte, want/2)); err != nil {
			t.Error(err)
		}
		waitCalled(t, called) // the reader has the frame's start, and waits in this fill for its end
		cork(t, client)
		if _, err := client.Write(make([]byte, want/2)); err != nil {
			t.Error(err)
		}
		if err := client.Close(); err != nil {
			t.Error(err)
		}
	})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Read returned %v, want io.EOF", err)
	}
}

// TestReaderSeesResetAfterData checks that a client that sends data and
// resets the connection (a close with SO_LINGER 0, or with data it did
// not read) is seen to end: Linux's count of what a read left does not
// count the reset, so the reader, told that nothing is left, waits; the
// wait's bound (50 ms here) ends it, and the read after it finds the
// reset. The reset comes after a whole frame, and inside one.
func TestReaderSeesResetAfterData(t *testing.T) {
	for _, tc := range []struct {
		name string
		sent int // bytes of the 100-byte frame the client sends before its reset
	}{{"after a whole frame", 100}, {"inside a frame", 50}} {
		t.Run(tc.name, func(t *testing.T) {
			const want = 100
			client, p, _ := guardedReader(t, 50*time.Millisecond, want)
			if _, err := client.Write(make([]byte, tc.sent)); err != nil {
				t.Fatal(err)
			}
			if err := client.SetLinger(0); err != nil {
				t.Fatal(err)
			}
			if err := client.Close(); err != nil { // through loopback, the data and the reset are queued on return
				t.Fatal(err)
			}
			// Spend the socket's readiness for both, as the wake that leads
			// to a read does: wait for it (unless the netpoller took it
			// before the wait began, which forgets it: then the wait times
			// out).
			if err := p.deadline(time.Now().Add(100 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			first := true
			if err := p.rc.Read(func(uintptr) bool { ok := !first; first = false; return ok }); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			if err := p.deadline(time.Time{}); err != nil {
				t.Fatal(err)
			}
			var err error
			for err == nil { // the bytes of a frame inside come first
				err = readFrame(t, p, nil)
			}
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("Read returned %v, want ECONNRESET", err)
			}
		})
	}
}

// TestReaderWaitsAfterBoundOnIdle checks that the wait's bound ends only
// the wait on a read's word: a connection idle for longer than the bound
// still reads what comes after it, Read returns no timeout, and the reads
// after the one that found the socket empty trust their word again (the
// recheck does not outlast the read that ends it, which, frames handling
// all a client sends, may last as long as the connection).
func TestReaderWaitsAfterBoundOnIdle(t *testing.T) {
	const want = 100
	client, p, _ := guardedReader(t, 20*time.Millisecond, want)
	cleared := make(chan struct{}, 1) // fill clears the deadline once the bound ran out
	set := p.deadline
	p.deadline = func(d time.Time) error {
		if d.IsZero() {
			select {
			case cleared <- struct{}{}:
			default:
			}
		}
		return set(d)
	}
	type state struct {
		bounded, rechecking bool // as frames finds the reader, on its goroutine
	}
	states := make(chan state, 1)
	p.frames = func(b []byte) (int, int, error) {
		states <- state{!p.guardUntil.IsZero(), p.rechecking}
		return want, frameHeaderLen, nil // each write below is a frame
	}
	next := func() state {
		t.Helper()
		select {
		case st := <-states:
			return st
		case <-time.After(10 * time.Second):
			t.Fatal("frames was not called")
			return state{}
		}
	}
	write := func() {
		t.Helper()
		if _, err := client.Write(make([]byte, want)); err != nil {
			t.Fatal(err)
		}
	}
	const recheckFrames = 10
	err := readFrame(t, p, func() {
		write()
		next() // the frame is handled; the reader waits for more, bounded
		select {
		case <-cleared: // the bound ran out; the reader reads again
		case <-time.After(10 * time.Second):
			t.Fatal("the wait's bound did not run out")
		}
		write()
		if st := next(); st.bounded {
			t.Errorf("after the bound ran out, the reader found %+v, want no bound", st)
		}
		// Within a few frames more (the first may come while the recheck
		// reads, before it finds the socket empty; on a busy host the
		// bound may run out again between two writes), the reader trusts
		// its reads again: its wait is bounded anew, and it rechecks no
		// more.
		var st state
		for range recheckFrames {
			write()
			if st = next(); st.bounded && !st.rechecking {
				break
			}
		}
		if !st.bounded || st.rechecking {
			t.Errorf("%d frames after the bound ran out, the reader found %+v, want its wait bounded again, not rechecking", recheckFrames, st)
		}
		if err := client.Close(); err != nil {
			t.Error(err)
		}
	})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Read returned %v, want io.EOF after the frames", err)
	}
}

// waitCalled waits up to 10 s for frames to be called.
func waitCalled(t *testing.T, called <-chan struct{}) {
	t.Helper()
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("frames was not called")
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
