package configdir

import (
	"testing"
	"time"
)

// UsePortableWatcher makes Watch use fsnotify, as on platforms other than
// Linux, until the test ends.
func UsePortableWatcher(t testing.TB) {
	old := newNotifier
	newNotifier = newPortable
	t.Cleanup(func() { newNotifier = old })
}

// SetWriteWait shortens WriteWait until the test ends.
func SetWriteWait(t testing.TB, d time.Duration) {
	old := writeWait
	writeWait = d
	t.Cleanup(func() { writeWait = old })
}
