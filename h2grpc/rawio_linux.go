//go:build linux

package h2grpc

import (
	"syscall"
	"unsafe"
)

// sysRead reads the non-blocking socket fd into b without telling the
// scheduler that a system call is under way (see sysWrite).
func sysRead(fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, e
	}
}

// sysWrite writes b to the non-blocking socket fd without telling the
// scheduler. A read or write of a non-blocking socket never sleeps, so the
// goroutine keeps its P: announced (syscall.Write), the runtime's monitor
// hands the P of a write that runs longer than its tick (20 µs) to another
// thread, which costs thread switches and the monitor's frequent wake-ups.
func sysWrite(fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
