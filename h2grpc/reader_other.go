//go:build !unix

package h2grpc

import (
	"bufio"
	"io"
	"net"
)

// newReader returns a buffered reader of nc. (On Unix, it holds no buffer
// while the connection is idle: see reader.go.)
func newReader(nc net.Conn) io.Reader { return bufio.NewReaderSize(nc, 4<<10) }
