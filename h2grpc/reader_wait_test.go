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
	p := &pooledReader{rc: rc}
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
	// needs. Nothing signals that read (frames must not run), so the socket's
	// receive queue is polled, bounded by a deadline.
	deadline := time.Now().Add(10 * time.Second)
	for unread(t, rc) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the reader did not read what was sent")
		}
		time.Sleep(time.Millisecond) // polling a condition, bounded by the deadline
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
