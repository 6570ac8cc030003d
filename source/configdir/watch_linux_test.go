package configdir_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// needLeases skips the test where Linux gives no read leases (fs.leases-enable
// off, or a file system without them), by which Watch tells a file open for
// writing.
func needLeases(t *testing.T) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "lease"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f.Close() // no writer left
	if _, err := unix.FcntlInt(r.Fd(), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		t.Skipf("no read leases here: %v", err)
	}
}

// openPart creates the file at path and writes the start of content into
// it, a prefix that is valid YAML of its own, leaving it open; the rest is
// written and the file closed by the function it returns.
func openPart(t *testing.T, path, content string, cut int) (finish func()) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteString(content[:cut]); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := f.WriteString(content[cut:]); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWatchFileBeingWrittenAtStart: a file a writer has open when Watch
// starts is left out until its writer closes it, not loaded half-written
// (here with port 8 for 80): no event told the watcher it was being
// written, but Linux tells that it is open for writing.
func TestWatchFileBeingWrittenAtStart(t *testing.T) {
	needLeases(t)
	configdir.SetWriteWait(t, time.Hour) // only the close ends the wait
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	whole := blockCluster("b", "80")
	finish := openPart(t, filepath.Join(dir, "b.yaml"), whole, len(whole)-1)
	w := startWatch(t, configdir.NewLoader(dir), dir)
	before := want(t, map[string]string{"a.yaml": clusterYAML("a", 1)})
	if got := versions(w.result(t)); !slices.Equal(got, before) {
		t.Fatalf("b.yaml open for writing at the start: %v, want a.yaml's alone, %v", got, before)
	}
	finish()
	if got, want := w.changed(t, before), want(t, map[string]string{"a.yaml": clusterYAML("a", 1), "b.yaml": whole}); !slices.Equal(got, want) {
		t.Fatalf("b.yaml closed: %v, want %v", got, want)
	}
}

// TestWatchFileBeingWrittenInANewDirectory: a directory renamed into the
// tree with a file its writer still has open: the file's writes came before
// the directory was watched, and only its close comes after.
func TestWatchFileBeingWrittenInANewDirectory(t *testing.T) {
	needLeases(t)
	configdir.SetWriteWait(t, time.Hour)
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	if err := os.Mkdir(filepath.Join(dir, ".new"), 0o755); err != nil { // hidden: not walked
		t.Fatal(err)
	}
	whole := blockCluster("b", "80")
	finish := openPart(t, filepath.Join(dir, ".new", "b.yaml"), whole, len(whole)-1)
	w := startWatch(t, configdir.NewLoader(dir), dir)
	before := versions(w.result(t))
	if err := os.Rename(filepath.Join(dir, ".new"), filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if got := versions(w.result(t)); !slices.Equal(got, before) {
		t.Fatalf("sub/b.yaml open for writing in a directory renamed in: %v, want a.yaml's alone, %v", got, before)
	}
	finish()
	if got, want := w.changed(t, before), want(t, map[string]string{"a.yaml": clusterYAML("a", 1), "sub/b.yaml": whole}); !slices.Equal(got, want) {
		t.Fatalf("sub/b.yaml closed: %v, want %v", got, want)
	}
}

// TestWatchFileHeldOpenNotWritten: a file a process holds open for writing
// but last wrote longer than WriteWait ago (a lock holder, say) is read at
// the start, as a writer seen idle that long is.
func TestWatchFileHeldOpenNotWritten(t *testing.T) {
	needLeases(t)
	configdir.SetWriteWait(t, time.Minute)
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	path := filepath.Join(dir, "a.yaml")
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := startWatch(t, configdir.NewLoader(dir), dir)
	if got, want := versions(w.result(t)), want(t, map[string]string{"a.yaml": clusterYAML("a", 1)}); !slices.Equal(got, want) {
		t.Fatalf("a.yaml held open, last written 2 minutes ago: %v, want %v", got, want)
	}
}

// TestWatchClosedFileNotHeldByAWalk: inotify reports a writer's close
// before the writer has let go of the file; a walk in the same burst must
// not take the file for one still being written, and wait out WriteWait.
// The file is held open here to stand for that moment.
func TestWatchClosedFileNotHeldByAWalk(t *testing.T) {
	needLeases(t)
	configdir.SetWriteWait(t, time.Hour)
	fake := configdir.UseFakeNotifier(t)
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	before := versions(w.result(t))
	f, err := os.Create(filepath.Join(dir, "b.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(clusterYAML("b", 1)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	fake.Report(
		configdir.FakeEvent{Path: filepath.Join(dir, "b.yaml"), Op: "written"},
		configdir.FakeEvent{Path: filepath.Join(dir, "b.yaml"), Op: "closed"},
		configdir.FakeEvent{Path: filepath.Join(dir, "sub"), Op: "created"}, // a walk
	)
	if got, want := w.changed(t, before), want(t, map[string]string{"a.yaml": clusterYAML("a", 1), "b.yaml": clusterYAML("b", 1)}); !slices.Equal(got, want) {
		t.Fatalf("b.yaml reported closed, then a walk: %v, want %v", got, want)
	}
}

// TestWatchRewrittenInPlaceAfterItsClose: a file written in place and
// closed (or renamed into place), then at once written in place again,
// where the second writer's truncation and first part come after the
// watcher took in the first event but before the load reads the file (the
// fake notifier reports the first event alone, as inotify's reader that
// has not yet read the second writer's events): the load must not take
// what the second writer has written so far (here port 8 for 80), and its
// writes' events, once they come, hold the file until its close. Before,
// the load read the part.
func TestWatchRewrittenInPlaceAfterItsClose(t *testing.T) {
	needLeases(t)
	for _, first := range []string{"closed", "arrived"} {
		t.Run(first, func(t *testing.T) {
			configdir.SetWriteWait(t, time.Hour) // only the close ends the wait
			fake := configdir.UseFakeNotifier(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "a.yaml")
			write(t, dir, "a.yaml", blockCluster("a", "1"))
			w := startWatch(t, configdir.NewLoader(dir), dir)
			before := versions(w.result(t))
			whole := blockCluster("a", "80")
			f := truncate(t, path)
			if _, err := f.WriteString(whole[:len(whole)-1]); err != nil {
				t.Fatal(err)
			}
			fake.Report(configdir.FakeEvent{Path: path, Op: first}) // the first writer's
			if got := versions(w.result(t)); !slices.Equal(got, before) {
				t.Fatalf("a.yaml %s, a second writer at it: %v, want it as it was, %v", first, got, before)
			}
			fake.Report(configdir.FakeEvent{Path: path, Op: "written"}) // the second writer's, late
			if _, err := f.WriteString(whole[len(whole)-1:]); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			fake.Report(configdir.FakeEvent{Path: path, Op: "closed"})
			if got, want := w.changed(t, before), want(t, map[string]string{"a.yaml": whole}); !slices.Equal(got, want) {
				t.Fatalf("the second writer closed a.yaml: %v, want %v", got, want)
			}
		})
	}
}

// TestWatchClosedFileNotHeldByAReload: inotify reports a writer's close
// before the writer has let go of the file; a load of the file alone (no
// walk) that finds it still open for writing, and no write reported since
// the close, reads it soon after, rather than wait out WriteWait. The file
// is held open here to stand for that moment.
func TestWatchClosedFileNotHeldByAReload(t *testing.T) {
	needLeases(t)
	configdir.SetWriteWait(t, time.Hour)
	fake := configdir.UseFakeNotifier(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	before := versions(w.result(t))
	f := truncate(t, path)
	if _, err := f.WriteString(clusterYAML("a", 2)); err != nil {
		t.Fatal(err)
	}
	fake.Report(
		configdir.FakeEvent{Path: path, Op: "written"},
		configdir.FakeEvent{Path: path, Op: "closed"},
	)
	if got, want := w.changed(t, before), want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}); !slices.Equal(got, want) {
		t.Fatalf("a.yaml reported closed, still open: %v, want %v", got, want)
	}
}
