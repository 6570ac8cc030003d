//go:build unix

package h2grpc

import (
	"io"
	"net"
	"sync/atomic"
	"syscall"
)

// newWriter returns the writer of nc: a *socketWriter if rc, nc's socket
// (socketOf), is not nil; nc itself otherwise (TLS). A socket's descriptor
// is taken to be non-blocking, as those of the net package's connections
// are: a write that blocked would hold its P (see rawIO).
func newWriter(nc net.Conn, rc syscall.RawConn, sent *atomic.Uint64) io.Writer {
	if rc == nil {
		return nc
	}
	w := &socketWriter{rc: rc, sent: sent}
	w.fn = w.write
	return w
}

// socketWriter writes a socket with sysWrite, waiting in the netpoller
// while the socket's buffer is full. It is used under the connection's wmu.
type socketWriter struct {
	rc     syscall.RawConn
	fn     func(fd uintptr) bool // write, made once
	b      []byte                // what Write was given
	n      int                   // bytes of b written
	err    error                 // the socket's error
	noWait bool                  // set by tryWrite: write does not wait
	sent   *atomic.Uint64        // counts the bytes the socket takes, if not nil
}

// Write writes all of b, or fails.
func (w *socketWriter) Write(b []byte) (int, error) {
	w.b, w.n, w.err = b, 0, nil
	err := w.rc.Write(w.fn)
	n := w.n
	w.b = nil
	if err == nil {
		err = w.err
	}
	return n, err
}

// tryWrite writes as much of b as the socket takes without waiting.
func (w *socketWriter) tryWrite(b []byte) (int, error) {
	w.noWait = true
	n, err := w.Write(b)
	w.noWait = false
	return n, err
}

// write is Write's attempt on fd; it returns false to wait until the
// socket is writable (unless noWait).
func (w *socketWriter) write(fd uintptr) bool {
	for w.n < len(w.b) {
		n, err := sysWrite(fd, w.b[w.n:])
		switch {
		case err == nil:
			w.n += n
			if w.sent != nil {
				w.sent.Add(uint64(n))
			}
		case wouldBlock(err):
			return w.noWait
		default:
			w.err = err
			return true
		}
	}
	return true
}
