//go:build unix && !linux

package h2grpc

import "syscall"

// sysRead reads the non-blocking socket fd into b.
func sysRead(fd uintptr, b []byte) (int, error) { return retryEINTR(syscall.Read, fd, b) }

// sysWrite writes b to the non-blocking socket fd.
func sysWrite(fd uintptr, b []byte) (int, error) { return retryEINTR(syscall.Write, fd, b) }

// retryEINTR calls io on fd and b until no signal interrupts it.
func retryEINTR(io func(int, []byte) (int, error), fd uintptr, b []byte) (int, error) {
	for {
		n, err := io(int(fd), b)
		if err != syscall.EINTR {
			return n, err
		}
	}
}
