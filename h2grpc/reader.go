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
	var n int
	var rerr error
	err := p.rc.Read(func(fd uintptr) bool {
		dst := b
		if len(b) < readBufSize {
			p.buf = p.pool.Get(readBufSize)
			dst = *p.buf
		}
		n, rerr = syscall.Read(int(fd), dst)
		if rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK {
			if p.buf != nil {
				p.pool.Put(p.buf) // not held while waiting
				p.buf = nil
			}
			return false
		}
		return true
	})
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
