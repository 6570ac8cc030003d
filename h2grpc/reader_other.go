//go:build !unix

package h2grpc

import (
	"bufio"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

// newReader returns a buffered reader of nc. (On Unix, it holds no buffer
// while the connection is idle, and handles frames inside its reads: see
// reader.go.)
func newReader(nc net.Conn, _ syscall.RawConn, alive *connAlive) io.Reader {
	return bufio.NewReaderSize(aliveReader{nc, alive}, 4<<10)
}

// socketOf returns nil: sockets are read and written through net.Conn here.
func socketOf(net.Conn) syscall.RawConn { return nil }

// pooledReader is Unix's (see reader.go); newReader returns none here.
type pooledReader struct{ frames frameHandler }

func (p *pooledReader) Read([]byte) (int, error) { return 0, io.EOF }
func (p *pooledReader) take(int) ([]byte, bool)  { return nil, false }
func (p *pooledReader) atBoundary()              {}

func (p *pooledReader) nextFrame() (http2.FrameType, http2.Flags, bool) { return 0, 0, false }

// guardWith does nothing: see reader.go.
func (p *pooledReader) guardWith(func(time.Time) error) {}

// newWriter returns nc. (On Unix, sockets are written without announcing
// the system call to the scheduler: see writer.go.)
func newWriter(nc net.Conn, _ syscall.RawConn, _ *atomic.Uint64) io.Writer { return nc }
