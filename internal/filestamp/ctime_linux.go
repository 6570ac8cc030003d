package filestamp

import (
	"io/fs"
	"syscall"
	"time"
)

// ChangeTime is the file's change time (ctime), or zero if info does not
// say. Every write, truncation and change of the file's times moves it,
// and no writer can set it: a file rewritten with as many bytes and its
// modification time put back (cp -p) keeps its size and modification time,
// not its change time.
func ChangeTime(info fs.FileInfo) time.Time {
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		return time.Unix(sys.Ctim.Unix())
	}
	return time.Time{}
}
