package configdir_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdsd/xdsd/source/configdir"
)

// TestWatchHiddenLinkExchanged: a "..data" link swapped with a new one by
// an atomic exchange (renameat2's RENAME_EXCHANGE, what `mv --exchange`
// does), the old one then removed. inotify reports MOVED_FROM ..data_new,
// MOVED_TO ..data, MOVED_FROM ..data, MOVED_TO ..data_new, DELETE
// ..data_new: the last event that names ..data says it went, though a new
// link is there.
func TestWatchHiddenLinkExchanged(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir := t.TempDir()
		linkData(t, dir, clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		w.result(t)
		write(t, dir, filepath.Join("..v2", "a.yaml"), clusterYAML("a", 2))
		if err := os.Symlink("..v2", filepath.Join(dir, "..data_new")); err != nil {
			t.Fatal(err)
		}
		if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "..data_new"), unix.AT_FDCWD, filepath.Join(dir, "..data"), unix.RENAME_EXCHANGE); err != nil {
			t.Skipf("RENAME_EXCHANGE: %v", err)
		}
		if err := os.Remove(filepath.Join(dir, "..data_new")); err != nil { // the old link
			t.Fatal(err)
		}
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}))
	})
}
