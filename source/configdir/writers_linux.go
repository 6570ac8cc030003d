package configdir

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// writtenAt reports whether a process has the file at path open for
// writing, as far as Linux tells, and when the file was last modified: a
// read lease cannot be taken on such a file (fcntl F_SETLEASE, EAGAIN).
// The lease, taken on a descriptor of xdsd's own, is let go at once; a
// writer that opened the file meanwhile waited that long (one that opened
// it O_NONBLOCK was refused, EWOULDBLOCK), and xdsd is sent SIGIO, which
// Go ignores unless asked for it. It reports false when it cannot tell:
// on a file system that is not local (NFS and SMB refuse a lease for
// reasons of their own, without delegation or oplock), on a file of
// another user without CAP_LEASE.
func writtenAt(path string) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	fd := int(f.Fd())
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) != nil || !localFS[int64(sfs.Type)] {
		return time.Time{}, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return time.Time{}, false
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK)
	if err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	}
	return time.Unix(st.Mtim.Unix()), errors.Is(err, unix.EAGAIN)
}

// localFS are the file systems whose leases say only whether a file is
// open for writing: local ones.
var localFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC: true, unix.XFS_SUPER_MAGIC: true, unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC: true, unix.OVERLAYFS_SUPER_MAGIC: true, unix.F2FS_SUPER_MAGIC: true,
	0x2fc12fc1: true, // ZFS
}
