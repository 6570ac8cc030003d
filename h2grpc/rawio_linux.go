//go:build linux

package h2grpc

import (
	"syscall"
	"unsafe"
)

// sysRead reads the non-blocking socket fd into b (see rawIO).
func sysRead(fd uintptr, b []byte) (int, error) { return rawIO(syscall.SYS_READ, fd, b) }

// sysWrite writes b to the non-blocking socket fd (see rawIO).
func sysWrite(fd uintptr, b []byte) (int, error) { return rawIO(syscall.SYS_WRITE, fd, b) }

// rawIO reads or writes (trap) the non-blocking socket fd without telling
// the scheduler that a system call is under way, and retries it if a
// signal interrupted it. Such a call never sleeps, so the goroutine may
// keep its P: announced (syscall.Read, syscall.Write), the runtime's
// monitor hands the P of a call that runs longer than its tick (20 µs, as
// a response's write through loopback does) to another thread, which
// costs thread switches and keeps the monitor waking often.
func rawIO(trap, fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, e
	}
}
