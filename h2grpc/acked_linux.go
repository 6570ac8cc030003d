package h2grpc

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpAcked returns the bytes the peer's TCP has acknowledged on rc's
// socket (TCP_INFO's tcpi_bytes_acked, Linux 4.1 on), and whether the
// socket told: a count of 0, which a kernel without the field gives too,
// tells nothing.
func tcpAcked(rc syscall.RawConn) (uint64, bool) {
	if rc == nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil {
		return 0, false
	}
	return info.Bytes_acked, info.Bytes_acked > 0
}
