//go:build unix

package h2grpc

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

// readBufs and bigReadBufs hold the read buffers of connections that have
// nothing unread. Unlike grpc-go's shared pool, they do not clear a buffer
// they hand out: a buffer is read into before it is read from.
var (
	readBufs    = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}
	bigReadBufs = sync.Pool{New: func() any { b := make([]byte, bigReadBufSize); return &b }}
)

// socketOf returns the socket under nc, or nil if nc is not a socket (TLS).
func socketOf(nc net.Conn) syscall.RawConn {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}

// newReader returns a buffered reader of nc that holds its buffer only while
// it has bytes in it: an idle connection, whose reader waits for the socket
// to become readable, holds none. It returns a *pooledReader if rc, nc's
// socket (socketOf), is not nil; other connections (TLS) get a plain
// bufio.Reader. Each read that gets bytes marks alive.
func newReader(nc net.Conn, rc syscall.RawConn, alive *connAlive) io.Reader {
	if rc == nil {
		return bufio.NewReaderSize(aliveReader{nc, alive}, 4<<10)
	}
	return &pooledReader{rc: rc, inq: newInqReader(rc), alive: alive}
}

// pooledReader reads a socket through a buffer from readBufs, taken when
// the socket has data and given back once a read finds it empty with
// nothing left unread. It is used by one goroutine, the connection's.
//
// If frames is set, the reader handles frames inside the socket read when
// the read loop asks for a frame header with nothing buffered (boundary):
// after each read it passes the buffered bytes to frames, and while that
// handles them all, it reads on, and waits for the socket again once a read
// finds nothing (EAGAIN), holding the start of a frame, if one is left over,
// until the rest comes. So a client's ACK costs the read loop no return from
// the read, no frame-by-frame copying through the framer, and no second
// entry into the netpoller's read.
type pooledReader struct {
	rc    syscall.RawConn
	inq   *inqReader // nil unless the socket tells what each read left in it
	alive *connAlive // marked by each read that gets bytes; nil in some tests
	buf   *[]byte    // nil while there is nothing unread and no read is under way
	r, w  int        // unread bytes are (*buf)[r:w]

	// big is set once a frame outgrew the small buffer: the reads that
	// follow start in a big one, since a client that repeats a large node
	// (an Envoy's, some 34 KB) sends every request large, and a read into
	// a small buffer first costs a system call more and a copy. It is
	// cleared after smallHolds buffers in a row held no more than a small
	// one would have.
	big    bool
	small  uint8 // big buffers in a row that held no more than a small one
	filled int   // bytes read into buf since it was taken

	frames   frameHandler // set by the read loop once the connection's first frame is handled
	boundary bool         // the read loop is at a frame boundary: frames may run
	need     int          // while boundary: the bytes past r that frames needs before it runs again

	// A wait on a read's word that it left nothing in the socket (inq) is
	// bounded by a read deadline: see trustLeft.
	deadline   func(time.Time) error // the socket's SetReadDeadline; nil until guardWith
	recheck    time.Duration         // how long such a wait lasts before fill reads again
	guardUntil time.Time             // the read deadline trustLeft set; zero if none is
	rechecking bool                  // a bounded wait ran out: fill reads until EAGAIN

	// The read fill passes to rc, made once (a closure would be allocated
	// on every read), and its arguments and results.
	readFn func(fd uintptr) bool
	dst    []byte // the caller's buffer: read into directly if it is large
	direct int    // bytes read into dst, or -1
	rerr   error  // the socket's error (io.EOF at its end), after what was read before it
	ferr   error  // an error from frames: returned at once
}

// Read reads from the buffer, or from the socket once it is empty.
func (p *pooledReader) Read(b []byte) (int, error) {
	if p.r == p.w {
		if err := p.fill(b); err != nil {
			return 0, err
		}
		if p.direct >= 0 {
			return p.direct, nil
		}
	}
	p.boundary = false
	n := copy(b, (*p.buf)[p.r:p.w])
	p.r += n
	return n, nil
}

// nextFrame returns the type and flags of the next frame, if its header
// is buffered.
func (p *pooledReader) nextFrame() (http2.FrameType, http2.Flags, bool) {
	if p.w-p.r < frameHeaderLen {
		return 0, 0, false
	}
	return http2.FrameType((*p.buf)[p.r+3]), http2.Flags((*p.buf)[p.r+4]), true
}

// take returns the next n bytes without a copy, if they are buffered. They
// stay valid until the next Read.
func (p *pooledReader) take(n int) ([]byte, bool) {
	if p.w-p.r < n {
		return nil, false
	}
	p.boundary = false
	b := (*p.buf)[p.r : p.r+n : p.r+n]
	p.r += n
	return b, true
}

// atBoundary tells the reader that the read loop is about to read a frame
// header: if nothing is buffered, frames may run inside the next read.
func (p *pooledReader) atBoundary() {
	p.boundary, p.need = p.frames != nil && p.r == p.w, 0
}

// fill waits for the socket to be readable and reads it: into b if b is at
// least a buffer long and the read loop is inside a frame (then p.direct
// holds the count), else into the buffer, where frames may handle what it
// can first. It returns once there is something for the caller.
func (p *pooledReader) fill(b []byte) error {
	if p.ferr != nil {
		return p.ferr
	}
	if p.rerr != nil {
		return p.rerr
	}
	if p.readFn == nil {
		p.readFn = p.read
	}
	p.dst, p.direct = b, -1
	err := p.rc.Read(p.readFn)
	for err != nil && !p.guardUntil.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) {
		// A wait on a read's word ran out (or its deadline passed since):
		// read the socket until it says it has nothing (trustLeft), which
		// ends the recheck, though not this read if frames handles all.
		p.guardUntil = time.Time{}
		if err = p.deadline(time.Time{}); err == nil {
			p.rechecking = true
			err = p.rc.Read(p.readFn)
			p.rechecking = false
		}
	}
	p.dst, p.boundary = nil, false
	switch {
	case err != nil:
		p.release()
		return err
	case p.ferr != nil:
		return p.ferr
	case p.direct >= 0 || p.r < p.w:
		return nil
	}
	return p.rerr
}

// read is fill's read of the socket fd; it returns false to wait for the
// socket to become readable.
func (p *pooledReader) read(fd uintptr) bool {
	for {
		if p.r == p.w && len(p.dst) >= readBufSize && !p.boundary {
			p.release()
			n, err := sysRead(fd, p.dst)
			if wouldBlock(err) {
				p.rechecking = false // the socket said it has nothing: the wait is sound
				return false
			}
			if err != nil || n == 0 {
				p.rerr = readErr(err)
				return true
			}
			p.direct = n
			p.markAlive()
			return true
		}
		if p.buf == nil {
			p.takeBuf()
		}
		buf := *p.buf
		if p.r == p.w {
			p.r, p.w = 0, 0
		} else if p.w == len(buf) && p.r > 0 { // keep the start of a frame, at the front
			p.w = copy(buf, buf[p.r:p.w])
			p.r = 0
		}
		if p.w == len(buf) { // a frame longer than the buffer
			if len(buf) == bigReadBufSize {
				return true // longer than any this server accepts: the read loop fails it
			}
			buf = p.grow()
		}
		n, left, err := p.inq.read(fd, buf[p.w:])
		if wouldBlock(err) {
			// Nothing left over, or what frames needs more of: the start
			// of a frame, whose rest a client sends with it (a frame is
			// written whole), after any frames it waits to join to it.
			// Wait for it here, where the whole frame goes to frames,
			// rather than copy the start out to the read loop and the
			// rest after it. A connection that stops inside a frame so
			// holds its buffer, 64 KiB if the frame was larger than the
			// first, until the rest comes.
			p.rechecking = false // the socket said it has nothing: the wait is sound
			p.release()
			return false
		}
		if err != nil || n == 0 {
			p.rerr = readErr(err)
			p.release()
			return true
		}
		p.w += n
		p.filled += n
		p.markAlive()
		if !p.boundary {
			return true
		}
		if p.w-p.r < p.need { // the frame frames waits for is not whole yet
			if left == 0 && p.trustLeft() {
				return false // (see below)
			}
			continue
		}
		used, need, err := p.frames(buf[p.r:p.w])
		p.r += used
		p.need = need
		switch {
		case err != nil:
			p.ferr = err
			p.release()
			return true
		case need == 0:
			return true // a frame for the read loop
		}
		// Read on until the socket has nothing: a short read does not
		// tell that the client's FIN did not come with the data, and the
		// readiness the netpoller reported for both is spent. A read that
		// tells it left nothing, not even the FIN, does: wait at once, for
		// a while (trustLeft). (Only within this fill: RawConn.Read
		// forgets, before its first call of read, a readiness reported
		// since, so each fill reads.)
		if left == 0 && p.trustLeft() {
			p.release()
			return false
		}
	}
}

// markAlive tells the keepalive check that the socket has read bytes.
func (p *pooledReader) markAlive() {
	if p.alive != nil {
		p.alive.markAlive()
	}
}

// inqRecheck is how long a connection's reader waits on a read's word that
// it left nothing in the socket before it reads the socket again.
const inqRecheck = 10 * time.Second

// guardWith lets the reader wait on a read's word that it left nothing in
// the socket, if its reads tell that (inq), bounding the wait with
// deadline, the socket's SetReadDeadline, which nothing else may use from
// then on.
func (p *pooledReader) guardWith(deadline func(time.Time) error) {
	if p.inq != nil {
		p.deadline, p.recheck = deadline, inqRecheck
	}
}

// trustLeft reports whether the reader may wait for the socket on a read's
// word that it left nothing (TCP_INQ), and bounds that wait. Linux counts
// a FIN as a byte left, but not a reset (or another error) that came after
// the data: the read returns the data and leaves the error, whose
// readiness the wake that led to the read spent, so a wait on the word
// alone could last for ever. So such waits end at a read deadline, after
// which fill reads until the socket says EAGAIN (or the error). The
// deadline is moved only once half of it has passed: a busy connection's
// reads cost a clock reading, not a timer's reset; an idle one wakes once.
func (p *pooledReader) trustLeft() bool {
	if p.deadline == nil || p.rechecking {
		return false
	}
	now := time.Now()
	if p.guardUntil.Sub(now) < p.recheck/2 {
		until := now.Add(p.recheck)
		if p.deadline(until) != nil {
			return false
		}
		p.guardUntil = until
	}
	return true
}

// grow moves the unread bytes to a buffer from bigReadBufs, gives the
// small one back, and returns the new buffer.
func (p *pooledReader) grow() []byte {
	big := bigReadBufs.Get().(*[]byte)
	n := copy(*big, (*p.buf)[p.r:p.w])
	readBufs.Put(p.buf)
	p.buf, p.r, p.w = big, 0, n
	p.big, p.small = true, 0
	return *big
}

// smallHolds is how many big buffers in a row must hold no more than a
// small one before the reader goes back to small ones: a client that
// repeats a large node and also pings (grpc-go's BDP estimator pings
// after each response) alternates small reads with large ones.
const smallHolds = 4

// takeBuf takes a buffer for the reads to come: a big one if the last
// requests were large.
func (p *pooledReader) takeBuf() {
	pool := &readBufs
	if p.big {
		pool = &bigReadBufs
	}
	p.buf, p.r, p.w, p.filled = pool.Get().(*[]byte), 0, 0, 0
}

// release gives the buffer back, if nothing in it is unread.
func (p *pooledReader) release() {
	if p.buf != nil && p.r == p.w {
		if len(*p.buf) == bigReadBufSize {
			switch {
			case p.filled == 0: // a hold that read nothing tells nothing
			case p.filled <= readBufSize:
				if p.small++; p.small >= smallHolds {
					p.big, p.small = false, 0
				}
			default:
				p.small = 0
			}
			bigReadBufs.Put(p.buf)
		} else {
			readBufs.Put(p.buf)
		}
		p.buf, p.r, p.w = nil, 0, 0
	}
}

func wouldBlock(err error) bool { return err == syscall.EAGAIN || err == syscall.EWOULDBLOCK }

// readErr is the error of a read that returned nothing: io.EOF if the
// client closed its side.
func readErr(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}
