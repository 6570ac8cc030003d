//go:build !unix

package configdir

import "io/fs"

// inode is 0: only Unix's file information has an inode number.
func inode(fs.FileInfo) uint64 { return 0 }
