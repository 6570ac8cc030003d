//go:build unix

package configdir

import (
	"io/fs"
	"syscall"
)

// inode is the file's inode number, or 0 if info does not say.
func inode(info fs.FileInfo) uint64 {
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Ino)
	}
	return 0
}
