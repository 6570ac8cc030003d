//go:build unix

package h2grpc

import (
	"bufio"
	"io"
	"net"
	"syscall"

	"google.golang.org/grpc/mem"
)

// readBufSize is the size of a connection's read buffer while it has
// unread bytes.
const readBufSize = 8 << 10

// newReader returns a buffered reader of nc that holds its buffer only while
// it has bytes in it: an idle connection, whose reader waits for the socket
// to become readable, holds none. Connections that are not sockets (TLS)
// get a plain bufio.Reader.
func newReader(nc net.Conn) io.Reader {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return &pooledReader{rc: rc, pool: mem.DefaultBufferPool()}
		}
	}
	return bufio.NewReaderSize(nc, 4<<10)
}

// pooledReader reads a socket through a buffer from pool, taken when the
// socket has data and given back once it is all consumed. It is used by
// one goroutine.
type pooledReader struct {
	rc   syscall.RawConn
	pool mem.BufferPool
	buf  *[]byte // nil when empty
	r, w int     // unread bytes are (*buf)[r:w]

	// The read fill passes to rc, made once (a closure would be allocated
	// on every read), and its arguments and results.
	readFn func(fd uintptr) bool
	dst    []byte
	n      int
	rerr   error
}

func (p *pooledReader) Read(b []byte) (int, error) {
	if p.buf == nil {
		if err := p.fill(b); err != nil {
			return 0, err
		}
		if p.buf == nil { // read straight into b
			return p.w, nil
		}
	}
	n := copy(b, (*p.buf)[p.r:p.w])
	p.r += n
	if p.r == p.w {
		p.pool.Put(p.buf)
		p.buf = nil
	}
	return n, nil
}

// fill waits for the socket to be readable, then reads into b if it is at
// least a buffer long (leaving p.buf nil and the count in p.w), else into
// a pooled buffer.
func (p *pooledReader) fill(b []byte) error {
	if p.readFn == nil {
		p.readFn = p.read
	}
	p.dst = b
	err := p.rc.Read(p.readFn)
	p.dst = nil
	n, rerr := p.n, p.rerr
	p.rerr = nil
	if err == nil {
		err = rerr
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err != nil {
		if p.buf != nil {
			p.pool.Put(p.buf)
			p.buf = nil
		}
		return err
	}
	p.r, p.w = 0, n
	return nil
}

// read is fill's read of the socket fd, into dst or a pooled buffer; it
// returns false (wait) if there is nothing to read.
func (p *pooledReader) read(fd uintptr) bool {
	dst := p.dst
	if len(dst) < readBufSize {
		p.buf = p.pool.Get(readBufSize)
		dst = *p.buf
	}
	p.n, p.rerr = syscall.Read(int(fd), dst)
	if p.rerr == syscall.EAGAIN || p.rerr == syscall.EWOULDBLOCK {
		if p.buf != nil {
			p.pool.Put(p.buf) // not held while waiting
			p.buf = nil
		}
		return false
	}
	return true
}
