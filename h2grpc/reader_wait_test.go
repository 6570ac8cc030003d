//go:build linux

package h2grpc

import (
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestReaderWaitsForWhatFramesNeeds checks that the reader does not run
// frames again until it holds the bytes frames said it needs: a client
// that sends the rest of a frame a byte at a time must not have the frames
// before it scanned again on every read.
func TestReaderWaitsForWhatFramesNeeds(t *testing.T) {
	client, rc := socketPair(t)

	const want = 100
	var mu sync.Mutex
	var calls []int // the bytes frames was given, call by call
	called := make(chan struct{}, 1)
	waits := make(chan struct{}, 1) // told each time the reader waits for the socket
	p := &pooledReader{rc: waitsTold{rc, waits}}
	p.frames = func(b []byte) (int, int, error) {
		mu.Lock()
		calls = append(calls, len(b))
		mu.Unlock()
		select {
		case called <- struct{}{}:
		default:
		}
		if len(b) < want {
			return 0, want, nil
		}
		return want, 0, nil // all used; then a frame for the read loop: Read returns
	}
	p.atBoundary()
	done := make(chan error, 1)
	go func() { _, err := p.Read(make([]byte, frameHeaderLen)); done <- err }()

	write := func(n int) {
		t.Helper()
		if _, err := client.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	write(50)
	<-called // frames has seen the start, and said what it needs
	write(want - 50 - 1)
	// Wait until the reader has read those bytes too, short of what frames
	// needs (frames must not run): the socket's receive queue is looked at
	// again each time the reader goes back to waiting for the socket.
	timeout := time.After(10 * time.Second)
	for unread(t, rc) > 0 {
		select {
		case <-waits:
		case <-timeout:
			t.Fatal("the reader did not read what was sent")
		}
	}
	write(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, n := range calls[1:] {
		if n < want {
			t.Fatalf("call %d to frames had %d bytes, after it asked for %d: calls %v", i+2, n, want, calls)
		}
	}
}

// waitsTold is a socket that tells waits each time its reader, reading it
// through RawConn.Read, is about to wait for it to become readable.
type waitsTold struct {
	syscall.RawConn
	waits chan<- struct{}
}

func (w waitsTold) Read(f func(fd uintptr) bool) error {
	return w.RawConn.Read(func(fd uintptr) bool {
		if f(fd) {
			return true
		}
		select {
		case w.waits <- struct{}{}:
		default:
		}
		return false
	})
}

// unread returns the bytes waiting in the socket's receive queue.
func unread(t *testing.T, rc syscall.RawConn) int {
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		t.Fatal(err, errno)
	}
	return int(n)
}
