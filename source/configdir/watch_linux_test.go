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
		dir, w := watchLinked(t)
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

// TestWatchHiddenLinkRemovedAfterALateWrite: a link renamed over a hidden
// file that a writer still has open is seen; the writer writes once more
// (inotify reports it by the name, now the link's), then the link is
// removed: a.yaml leads nowhere, and its cluster goes.
func TestWatchHiddenLinkRemovedAfterALateWrite(t *testing.T) {
	dir := t.TempDir()
	throughData(t, dir, clusterYAML("a", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	f, err := os.Create(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("x")
	if err := os.Symlink("..v1", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1)}))
	f.WriteString("y")
	f.Close()
	if err := os.Remove(filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	w.until(t, nil)
}

// TestWatchHiddenLinkInADirectoryRenamedIn: sub/..data was a hidden file;
// sub is renamed away and another renamed into place, where ..data is a
// link sub/a.yaml leads through. Removing that link is seen.
func TestWatchHiddenLinkInADirectoryRenamedIn(t *testing.T) {
	dir := t.TempDir()
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	w.result(t) // the new directory walked, and watched
	if err := os.WriteFile(filepath.Join(sub, "..data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sub, filepath.Join(dir, "old")); err != nil {
		t.Fatal(err)
	}
	w.result(t)
	staging := filepath.Join(t.TempDir(), "staging")
	linkData(t, staging, clusterYAML("a", 1))
	if err := os.Rename(staging, sub); err != nil {
		t.Fatal(err)
	}
	w.until(t, want(t, map[string]string{"sub/a.yaml": clusterYAML("a", 1)}))
	if err := os.Remove(filepath.Join(sub, "..data")); err != nil {
		t.Fatal(err)
	}
	w.until(t, nil)
}
