//go:build unix && !(linux && (amd64 || arm64))

package h2grpc

import "syscall"

// inqReader is 64-bit Linux's (see inq_linux.go): here no reader tells what a
// read left in the socket.
type inqReader struct{}

// newInqReader returns nil.
func newInqReader(syscall.RawConn) *inqReader { return nil }

// read reads fd into b with sysRead; what it left is not known (-1).
func (*inqReader) read(fd uintptr, b []byte) (n, left int, err error) {
	n, err = sysRead(fd, b)
	return n, -1, err
}
