//go:build !linux

package h2grpc

import "syscall"

// tcpAcked reports that the socket does not tell what its peer has
// acknowledged. (On Linux, it does: see acked_linux.go.)
func tcpAcked(syscall.RawConn) (uint64, bool) { return 0, false }
