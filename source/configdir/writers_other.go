//go:build !linux

package configdir

// openForWriting reports false: only Linux tells whether a file is open
// for writing (see the Linux version).
func openForWriting(string) bool { return false }
