package h2grpc_test

import "syscall"

// corkSocket holds back what the socket fd writes until it is uncorked or
// closed, so that a last write and the FIN go in one segment.
func corkSocket(fd uintptr) {
	_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1)
}
