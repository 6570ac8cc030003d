package configdir

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openForWriting reports whether a process has the file at path open for
// writing, as far as Linux tells: a read lease cannot be taken on such a
// file (fcntl F_SETLEASE, EAGAIN). The lease, taken on a descriptor of
// xdsd's own, is let go at once; a writer that opened the file meanwhile
// waited that long. It reports false when it cannot tell: a file of
// another user without CAP_LEASE, a file system without leases.
func openForWriting(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fd := f.Fd()
	_, err = unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_RDLCK)
	if err == nil {
		_, _ = unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_UNLCK)
	}
	return errors.Is(err, unix.EAGAIN)
}
