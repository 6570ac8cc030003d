// Package filestamp holds what tells that a file changed without reading
// it, beyond what os.FileInfo says portably: its change time.
package filestamp

import (
	"io/fs"
	"os"
)

// Same reports whether a and b, two os.Stat results, are of one version
// of one file: the same file (device and inode), size, modification time
// and change time. A nil one (no file) is the same only as another nil.
func Same(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) &&
		ChangeTime(a).Equal(ChangeTime(b))
}
