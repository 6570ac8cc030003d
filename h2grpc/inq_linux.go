//go:build linux && (amd64 || arm64)

package h2grpc

import (
	"syscall"
	"unsafe"
)

// tcpINQ is Linux's TCP_INQ socket option (since 4.18), and the type of the
// control message it adds to each read of the socket (TCP_CM_INQ).
const tcpINQ = 36

// inqReader reads a TCP socket that has TCP_INQ set with recvmsg, whose
// control message tells how many bytes the read left in the socket. A read
// that left none lets the reader wait for the socket at once, without the
// read that would find it empty: Linux reports a byte left once the
// client's FIN has come, so that an end that came with the data is still
// read. It is used by one goroutine, its pooledReader's.
type inqReader struct {
	hdr syscall.Msghdr
	iov syscall.Iovec
	ctl [24]byte // room for one control message holding an int32: syscall.CmsgSpace(4)
}

// newInqReader sets TCP_INQ on rc's socket and returns its reader, or nil
// if the socket is not TCP or the kernel does not know the option.
func newInqReader(rc syscall.RawConn) *inqReader {
	var err error = syscall.EINVAL
	if cerr := rc.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpINQ, 1)
	}); cerr != nil || err != nil {
		return nil
	}
	return &inqReader{}
}

// read reads the non-blocking socket fd into b (not empty), as sysRead
// does, and returns the bytes the read left in the socket (not 0 after the
// client's FIN), or -1 if that is not known: q is nil, or the kernel sent
// no count.
func (q *inqReader) read(fd uintptr, b []byte) (n, left int, err error) {
	if q == nil {
		n, err = sysRead(fd, b)
		return n, -1, err
	}
	q.iov.Base = &b[0]
	q.iov.SetLen(len(b))
	q.hdr.Iov = &q.iov
	q.hdr.Iovlen = 1
	q.hdr.Control = &q.ctl[0]
	for {
		q.hdr.SetControllen(len(q.ctl))
		q.hdr.Flags = 0
		r, _, e := syscall.RawSyscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&q.hdr)), 0)
		if e == syscall.EINTR {
			continue
		}
		q.iov.Base = nil // holds no buffer given back to its pool
		if e != 0 {
			return 0, -1, e
		}
		return int(r), q.left(), nil
	}
}

// left returns the count in the control message of the last read, or -1.
func (q *inqReader) left() int {
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&q.ctl[0]))
	data := syscall.CmsgLen(0)
	if int(q.hdr.Controllen) < data+4 || h.Level != syscall.SOL_TCP || h.Type != tcpINQ {
		return -1
	}
	return int(*(*int32)(unsafe.Pointer(&q.ctl[data])))
}
