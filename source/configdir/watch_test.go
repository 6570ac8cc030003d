package configdir_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdsd/xdsd/source/configdir"
)

// watching is a Watch running until the test ends, with what it reported.
type watching struct {
	results chan *configdir.Result
	errs    chan error
}

func startWatch(t *testing.T, l *configdir.Loader, dir string) *watching {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watching{results: make(chan *configdir.Result, 16), errs: make(chan error, 16)}
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = configdir.Watch(ctx, l, dir,
			func(r *configdir.Result) {
				select {
				case w.results <- r:
				case <-ctx.Done():
				}
			},
			func(err error) {
				select {
				case w.errs <- err:
				case <-ctx.Done():
				}
			})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

// next waits for the next load.
func (w *watching) next(t *testing.T) (*configdir.Result, error) {
	t.Helper()
	select {
	case r := <-w.results:
		return r, nil
	case err := <-w.errs:
		return nil, err
	case <-time.After(configdir.TestTimeout):
		t.Fatal("no reload within 10s")
	}
	return nil, nil
}

// result waits for the next load and fails the test if it was rejected.
func (w *watching) result(t *testing.T) *configdir.Result {
	t.Helper()
	r, err := w.next(t)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return r
}

// until waits for a load that holds the resources of want (versions), and
// fails the test on an error.
func (w *watching) until(t *testing.T, want []string) {
	t.Helper()
	for {
		if got := versions(w.result(t)); slices.Equal(got, want) {
			return
		}
	}
}

// changed waits for a load that holds other resources than was (versions),
// and returns them: loads that found nothing new (a second event of a
// change already loaded) are passed over.
func (w *watching) changed(t *testing.T, was []string) []string {
	t.Helper()
	for {
		if got := versions(w.result(t)); !slices.Equal(got, was) {
			return got
		}
	}
}

// eachNotifier runs test with Watch on each file watcher: Linux's own and
// the portable one.
func eachNotifier(t *testing.T, test func(t *testing.T)) {
	t.Run("default", test)
	t.Run("portable", func(t *testing.T) {
		configdir.UsePortableWatcher(t)
		test(t)
	})
}

// want is what a directory holding files (name → contents) loads to.
func want(t *testing.T, files map[string]string) []string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		write(t, dir, name, content)
	}
	res, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	return versions(res)
}

func TestWatch(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		if r := w.result(t); len(r.Resources) != 2 {
			t.Fatalf("initial load has %d resources", len(r.Resources))
		}
		write(t, dir, "sub/b.yaml", clusterYAML("b", 2)) // a new directory, then a file in it
		for r := w.result(t); len(r.Resources) != 4; r = w.result(t) {
		}
		write(t, dir, "a.yaml", "resources: [") // rejected: the last good one stands
		if _, err := w.next(t); err == nil || !strings.Contains(err.Error(), "a.yaml") {
			t.Fatalf("bad edit: error %v, want one naming the file", err)
		}
		write(t, dir, "a.yaml", clusterYAML("a", 5))
		if r := w.result(t); len(r.Resources) != 4 || r.Reread != 1 {
			t.Fatalf("fixed: %d resources, %d files read", len(r.Resources), r.Reread)
		}
	})
}

// TestWatchWaited: a load after a file event tells how long it waited for
// its burst to be quiet, at least Debounce; the first load waited for
// nothing.
func TestWatchWaited(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		if r := w.result(t); r.Waited != 0 || r.Took <= 0 {
			t.Fatalf("first load: waited %v, took %v; want 0 and more", r.Waited, r.Took)
		}
		write(t, dir, "a.yaml", clusterYAML("a", 2))
		if r := w.result(t); r.Waited < configdir.Debounce || r.Took <= 0 {
			t.Fatalf("load after a write: waited %v, took %v; want at least %v and more than 0", r.Waited, r.Took, configdir.Debounce)
		}
	})
}

// lockedFailFS is a directory whose files named in fail cannot be opened;
// fail may change while a watcher reads.
type lockedFailFS struct {
	fs.FS
	mu   sync.Mutex
	fail map[string]bool
}

func (f *lockedFailFS) Open(name string) (fs.File, error) {
	f.mu.Lock()
	failed := f.fail[name]
	f.mu.Unlock()
	if failed {
		return nil, errors.New("injected failure")
	}
	return f.FS.Open(name)
}

func (f *lockedFailFS) setFail(name string, fail bool) {
	f.mu.Lock()
	f.fail[name] = fail
	f.mu.Unlock()
}

// TestWatchReadsAgainAfterAFailedRead: a reload that cannot read a changed
// file fails, and the watcher then reads whatever changed on the next
// event, though it is about another file.
func TestWatchReadsAgainAfterAFailedRead(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		write(t, dir, n+".yaml", clusterYAML(n, 1))
	}
	fsys := &lockedFailFS{FS: os.DirFS(dir), fail: map[string]bool{}}
	w := startWatch(t, configdir.NewFSLoader(fsys, dir), dir)
	wait := func() (*configdir.Result, error) { t.Helper(); return w.next(t) }
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	fsys.setFail("b.yaml", true)
	write(t, dir, "b.yaml", clusterYAML("b", 2))
	if _, err := wait(); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("reload of an unreadable file: %v, want the injected failure", err)
	}
	fsys.setFail("b.yaml", false)
	write(t, dir, "c.yaml", clusterYAML("c", 3))
	want, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	newC := slices.IndexFunc(versions(want), func(v string) bool { return strings.HasPrefix(v, "eds/c@") })
	for {
		r, err := wait()
		if err != nil {
			t.Fatal(err)
		}
		if got := versions(r); slices.Contains(got, versions(want)[newC]) {
			if !slices.Equal(got, versions(want)) {
				t.Fatalf("after the failed read: %v, want %v", got, versions(want))
			}
			return
		}
	}
}

// TestWatchConfigMap: a Kubernetes ConfigMap volume holds links to the
// files (a.yaml → ..data/a.yaml) and changes them all at once by swapping
// the hidden link ..data to a new hidden directory. Watch sees the swap
// and reads the files anew.
func TestWatchConfigMap(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir := t.TempDir()
		version := func(v, content string) {
			t.Helper()
			write(t, dir, filepath.Join(v, "a.yaml"), content)
			if err := os.Symlink(v, filepath.Join(dir, "..data_tmp")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
		}
		version("..v1", clusterYAML("a", 1))
		if err := os.Symlink(filepath.Join("..data", "a.yaml"), filepath.Join(dir, "a.yaml")); err != nil {
			t.Fatal(err)
		}
		w := startWatch(t, configdir.NewLoader(dir), dir)
		if got, want := versions(w.result(t)), want(t, map[string]string{"a.yaml": clusterYAML("a", 1)}); !slices.Equal(got, want) {
			t.Fatalf("initial load: %v, want %v", got, want)
		}
		version("..v2", clusterYAML("a", 2))
		if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
			t.Fatal(err)
		}
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}))
	})
}

// TestWatchHiddenLinkMadeInPlace: a hidden link made where the files lead
// (..data, by ln -s rather than renamed into place, as Kubernetes does) is
// seen like a swapped one, though Watch looks at hidden names only when it
// loads, and not at one that came and went (the temporary file here).
func TestWatchHiddenLinkMadeInPlace(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir := t.TempDir()
		throughData(t, dir, clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		if got := versions(w.result(t)); len(got) != 0 {
			t.Fatalf("initial load, a.yaml leading nowhere: %v, want nothing", got)
		}
		// A writer's temporary file, renamed into place, comes and goes
		// around the link.
		write(t, dir, ".b.yaml.tmp", clusterYAML("b", 1))
		if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, ".b.yaml.tmp"), filepath.Join(dir, "b.yaml")); err != nil {
			t.Fatal(err)
		}
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1), "b.yaml": clusterYAML("b", 1)}))
	})
}

// linkData lays dir out as a Kubernetes ConfigMap volume does: a.yaml
// leads to ..data/a.yaml, and ..data to ..v1, which holds a.yaml with
// content.
func linkData(t *testing.T, dir, content string) {
	t.Helper()
	throughData(t, dir, content)
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// watchLinked starts Watch on a new directory laid out by linkData, and
// checks its first load: a.yaml's cluster.
func watchLinked(t *testing.T) (string, *watching) {
	t.Helper()
	dir := t.TempDir()
	linkData(t, dir, clusterYAML("a", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	if got, want := versions(w.result(t)), want(t, map[string]string{"a.yaml": clusterYAML("a", 1)}); !slices.Equal(got, want) {
		t.Fatalf("initial load: %v, want %v", got, want)
	}
	return dir, w
}

// throughData is linkData but for the link ..data, not made yet: a.yaml
// leads nowhere.
func throughData(t *testing.T, dir, content string) {
	t.Helper()
	write(t, dir, filepath.Join("..v1", "a.yaml"), content)
	if err := os.Symlink(filepath.Join("..data", "a.yaml"), filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
}

// TestWatchHiddenLinkRemoved: the hidden link the files lead through is
// removed: they lead nowhere now, and their clusters go.
func TestWatchHiddenLinkRemoved(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir, w := watchLinked(t)
		if err := os.Remove(filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		w.until(t, nil)
	})
}

// TestWatchTemporaryFilesCostNoLstat: a hidden file that comes and goes
// between two loads (a writer's temporary file, written, its attributes
// set, renamed into place) is no link: Watch does not look at it. One
// still there at a load (written, not yet renamed) is looked at once, and
// not again when it goes.
func TestWatchTemporaryFilesCostNoLstat(t *testing.T) {
	lstats := configdir.CountLstat(t)
	fake := configdir.UseFakeNotifier(t)
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	path := func(name string) string { return filepath.Join(dir, name) }
	write(t, dir, "b.yaml", clusterYAML("b", 1))
	fake.Report(
		configdir.FakeEvent{Path: path(".b.yaml.tmp"), Op: "created"},
		configdir.FakeEvent{Path: path(".b.yaml.tmp"), Op: "written"},
		configdir.FakeEvent{Path: path(".b.yaml.tmp"), Op: "closed"},
		configdir.FakeEvent{Path: path(".b.yaml.tmp"), Op: "changed"}, // its mode set, as rsync does
		configdir.FakeEvent{Path: path(".b.yaml.tmp"), Op: "gone"},
		configdir.FakeEvent{Path: path("b.yaml"), Op: "arrived"},
	)
	w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1), "b.yaml": clusterYAML("b", 1)}))
	if n := lstats.Load(); n != 0 {
		t.Fatalf("%d lstat calls for a temporary file that came and went, want 0", n)
	}
	write(t, dir, ".c.yaml.tmp", clusterYAML("c", 1))
	fake.Report(
		configdir.FakeEvent{Path: path(".c.yaml.tmp"), Op: "created"},
		configdir.FakeEvent{Path: path(".c.yaml.tmp"), Op: "written"},
		configdir.FakeEvent{Path: path(".c.yaml.tmp"), Op: "closed"},
	)
	write(t, dir, "a.yaml", clusterYAML("a", 2)) // a load between the write and the rename
	fake.Report(configdir.FakeEvent{Path: path("a.yaml"), Op: "closed"})
	w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2), "b.yaml": clusterYAML("b", 1)}))
	if err := os.Rename(path(".c.yaml.tmp"), path("c.yaml")); err != nil {
		t.Fatal(err)
	}
	fake.Report(
		configdir.FakeEvent{Path: path(".c.yaml.tmp"), Op: "gone"},
		configdir.FakeEvent{Path: path("c.yaml"), Op: "arrived"},
	)
	w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2), "b.yaml": clusterYAML("b", 1), "c.yaml": clusterYAML("c", 1)}))
	if n := lstats.Load(); n != 1 {
		t.Fatalf("%d lstat calls for a temporary file there at a load, want 1", n)
	}
}

// TestWatchLinkOverAHiddenFileBeingWritten: a hidden regular file that a
// writer still has open is removed, and a link made at its name. inotify
// reports the writer's later writes and close by that name, after the
// link's creation (the order here is the kernel's): they must not hide the
// link, which a.yaml leads through.
func TestWatchLinkOverAHiddenFileBeingWritten(t *testing.T) {
	fake := configdir.UseFakeNotifier(t)
	dir := t.TempDir()
	throughData(t, dir, clusterYAML("a", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "..data")
	fake.Report(
		configdir.FakeEvent{Path: p, Op: "created"}, // the regular file
		configdir.FakeEvent{Path: p, Op: "written"},
		configdir.FakeEvent{Path: p, Op: "gone"},
		configdir.FakeEvent{Path: p, Op: "created"}, // the link
		configdir.FakeEvent{Path: p, Op: "written"}, // the removed file's writer
		configdir.FakeEvent{Path: p, Op: "closed"},
	)
	w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1)}))
}

// TestWatchHiddenLinkReplacedByDirectory: the link removed and a directory
// renamed to its name: a.yaml now leads into the directory.
func TestWatchHiddenLinkReplacedByDirectory(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir, w := watchLinked(t)
		outside := t.TempDir()
		write(t, outside, filepath.Join("v2", "a.yaml"), clusterYAML("a", 2))
		if err := os.Remove(filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(outside, "v2"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}))
	})
}

// blockCluster is clusterYAML in block style, so that a prefix of it
// ending within the port is valid YAML with another port.
func blockCluster(name, port string) string {
	return "resources:" + fmt.Sprintf(cluster, name) + fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: %s
  endpoints:
  - lb_endpoints:
    - endpoint:
        address:
          socket_address:
            address: 127.0.0.1
            port_value: %s`, name, port)
}

// truncate opens the file at path for writing in place, emptied, until the
// test ends.
func truncate(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWatchWaitsForWriter: a file written in place (truncated, written in
// pieces, closed) is read once its writer closes it; until then it keeps
// what it held, though other files change and load. Before, it was read
// whenever its events paused for Debounce: empty (its cluster removed),
// then with a port cut short. Linux only: other platforms do not report
// a writer's close.
func TestWatchWaitsForWriter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux reports a writer's close")
	}
	configdir.SetWriteWait(t, time.Hour) // only the close ends the wait
	dir := t.TempDir()
	write(t, dir, "a.yaml", blockCluster("a", "1"))
	write(t, dir, "b.yaml", clusterYAML("b", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	f := truncate(t, filepath.Join(dir, "a.yaml"))
	write(t, dir, "b.yaml", clusterYAML("b", 2))
	if got, want := versions(w.result(t)), want(t, map[string]string{"a.yaml": blockCluster("a", "1"), "b.yaml": clusterYAML("b", 2)}); !slices.Equal(got, want) {
		t.Fatalf("a.yaml truncated, b.yaml changed: %v, want %v", got, want)
	}
	whole := blockCluster("a", "80")
	if _, err := f.WriteString(whole[:len(whole)-1]); err != nil { // port 8
		t.Fatal(err)
	}
	write(t, dir, "sub/c.yaml", clusterYAML("c", 1)) // a new directory: the whole tree is walked
	held := want(t, map[string]string{"a.yaml": blockCluster("a", "1"), "b.yaml": clusterYAML("b", 2), "sub/c.yaml": clusterYAML("c", 1)})
	w.until(t, held)
	if _, err := f.WriteString(whole[len(whole)-1:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The new directory's events may load it again, unchanged, first.
	if got, want := w.changed(t, held), want(t, map[string]string{"a.yaml": whole, "b.yaml": clusterYAML("b", 2), "sub/c.yaml": clusterYAML("c", 1)}); !slices.Equal(got, want) {
		t.Fatalf("a.yaml closed: %v, want %v", got, want)
	}
}

// TestWatchRenamedOverWriter: a file renamed over one that a writer still
// has open is read at once: the writer's file is no longer the one there.
func TestWatchRenamedOverWriter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux reports a writer's close")
	}
	configdir.SetWriteWait(t, time.Hour)
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	f := truncate(t, filepath.Join(dir, "a.yaml"))
	if _, err := f.WriteString("resources:"); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.yaml", clusterYAML("a", 3))
	w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 3)}))
}

// TestWatchWriterIdle: a file its writer keeps open is read once it went
// WriteWait without a write.
func TestWatchWriterIdle(t *testing.T) {
	configdir.SetWriteWait(t, 200*time.Millisecond)
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	write(t, dir, "b.yaml", clusterYAML("b", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	f := truncate(t, filepath.Join(dir, "a.yaml"))
	if _, err := f.WriteString(clusterYAML("a", 2)); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "b.yaml", clusterYAML("b", 2)) // loads while a.yaml waits
	w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2), "b.yaml": clusterYAML("b", 2)}))
}

// TestWatchRenamedDirectory: after a directory is renamed, changes in it
// load under its new name. Linux only: fsnotify drops the watch of a
// renamed directory when it sees the rename, which may be after Watch
// added it again under its new name.
func TestWatchRenamedDirectory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fsnotify may drop a renamed directory's watch")
	}
	dir := t.TempDir()
	write(t, dir, "sub/b.yaml", clusterYAML("b", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	if err := os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "sub2")); err != nil {
		t.Fatal(err)
	}
	w.until(t, want(t, map[string]string{"sub2/b.yaml": clusterYAML("b", 1)}))
	write(t, dir, "sub2/b.yaml", clusterYAML("b", 2))
	w.until(t, want(t, map[string]string{"sub2/b.yaml": clusterYAML("b", 2)}))
}

// TestWatchLinkedDirectory: the directory given may be a symbolic link to
// the one that holds the files.
func TestWatchLinkedDirectory(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		target := t.TempDir()
		link := filepath.Join(t.TempDir(), "conf")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		write(t, target, "a.yaml", clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(link), link)
		w.result(t)
		write(t, target, "a.yaml", clusterYAML("a", 2))
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}))
	})
}

// TestWatchLinkedDirectorySwapped: the link given as the directory is
// made to lead to another (a deploy's "current" link), in place or by a
// new link renamed over it: Watch loads and watches the new directory,
// though the old one stays.
func TestWatchLinkedDirectorySwapped(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		parent := t.TempDir()
		link := filepath.Join(parent, "current")
		for i := 1; i <= 3; i++ {
			write(t, parent, fmt.Sprintf("r%d/a.yaml", i), clusterYAML("a", i))
		}
		if err := os.Symlink("r1", link); err != nil {
			t.Fatal(err)
		}
		w := startWatch(t, configdir.NewLoader(link), link)
		w.result(t)

		// ln -sfn: the link removed and made again.
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("r2", link); err != nil {
			t.Fatal(err)
		}
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}))
		write(t, parent, "r2/a.yaml", clusterYAML("a", 4)) // watched now
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 4)}))

		// A new link renamed over it.
		if err := os.Symlink("r3", filepath.Join(parent, "next")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(parent, "next"), link); err != nil {
			t.Fatal(err)
		}
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 3)}))
		write(t, parent, "r3/a.yaml", clusterYAML("a", 5))
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 5)}))
	})
}

// TestWatchParentRenamedAwayAndBack: the directory's parent renamed away
// takes the directory with it (reported once gone for RootRetry); renamed
// back, the directory is loaded and watched again.
func TestWatchParentRenamedAwayAndBack(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		top := t.TempDir()
		parent := filepath.Join(top, "p")
		dir := filepath.Join(parent, "conf")
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		w.result(t)
		if err := os.Rename(parent, filepath.Join(top, "q")); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := w.next(t); err != nil {
				break // gone, reported
			}
		}
		if err := os.Rename(filepath.Join(top, "q"), parent); err != nil {
			t.Fatal(err)
		}
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1)}))
		write(t, dir, "a.yaml", clusterYAML("a", 2)) // watched again
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}))
	})
}

// TestWatchRescan: a file linked from outside the directory, rewritten
// where it is, brings no event; Rescan has it read.
func TestWatchRescan(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir, outside := t.TempDir(), t.TempDir()
		write(t, outside, "a.yaml", clusterYAML("a", 1))
		if err := os.Symlink(filepath.Join(outside, "a.yaml"), filepath.Join(dir, "a.yaml")); err != nil {
			t.Fatal(err)
		}
		l := configdir.NewLoader(dir)
		w := startWatch(t, l, dir)
		w.result(t)
		write(t, outside, "a.yaml", clusterYAML("a", 2))
		l.Rescan()
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}))
	})
}

// TestWatchRejectionHeld: a configuration with problems found after one
// loaded is reported only if it stands for RejectAfter: an EDS cluster
// whose endpoints file comes a moment later is not reported at all.
func TestWatchRejectionHeld(t *testing.T) {
	clusterOnly := "resources:" + fmt.Sprintf(cluster, "b")
	endpointsOnly := "resources:" + fmt.Sprintf(endpoints, "b", 2)
	t.Run("mended", func(t *testing.T) {
		held := configdir.SetRejectAfter(t, time.Hour)
		dir := t.TempDir()
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		w.result(t)
		write(t, dir, "b.yaml", clusterOnly)
		select {
		case err := <-held:
			if !strings.Contains(err.Error(), "EDS cluster has no endpoints") {
				t.Fatalf("held %v", err)
			}
		case <-time.After(configdir.TestTimeout):
			t.Fatal("no rejection held")
		}
		write(t, dir, "b-endpoints.yaml", endpointsOnly)
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1), "b.yaml": clusterOnly, "b-endpoints.yaml": endpointsOnly}))
	})
	t.Run("standing", func(t *testing.T) {
		configdir.SetRejectAfter(t, 10*time.Millisecond)
		dir := t.TempDir()
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		w.result(t)
		write(t, dir, "b.yaml", clusterOnly)
		if _, err := w.next(t); err == nil || !strings.Contains(err.Error(), `b.yaml: cds "b": eds_cluster_config: EDS cluster has no endpoints`) {
			t.Fatalf("a problem that stands: %v, want it reported", err)
		}
	})
	t.Run("first_load_at_once", func(t *testing.T) {
		configdir.SetRejectAfter(t, time.Hour)
		dir := t.TempDir()
		write(t, dir, "b.yaml", clusterOnly)
		w := startWatch(t, configdir.NewLoader(dir), dir)
		if _, err := w.next(t); err == nil {
			t.Fatal("the first load's problems not reported")
		}
	})
}

// TestWatchAfterLostEvents: when the watcher loses events (the kernel's
// queue overflowed), Watch reports it, walks the directory, and watches the
// directories created meanwhile.
func TestWatchAfterLostEvents(t *testing.T) {
	fake := configdir.UseFakeNotifier(t)
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	w := startWatch(t, configdir.NewLoader(dir), dir)
	w.result(t)
	write(t, dir, "sub/b.yaml", clusterYAML("b", 1)) // the fake reports nothing
	fake.Fail(errors.New("events lost"))
	if _, err := w.next(t); err == nil || !strings.Contains(err.Error(), "events lost") {
		t.Fatalf("lost events: %v, want them reported", err)
	} else if _, ok := errors.AsType[*configdir.WatcherError](err); !ok {
		t.Fatalf("lost events reported as %T, want a *configdir.WatcherError: no configuration was rejected", err)
	}
	w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1), "sub/b.yaml": clusterYAML("b", 1)}))
	if !slices.Contains(fake.Watched(), filepath.Join(dir, "sub")) {
		t.Fatalf("watched %v: not the new directory", fake.Watched())
	}
}

// TestWatchLinkToDirectory: a link to a directory is not followed, by
// Watch as by Load; the directory it leads to goes on loading under its
// own name.
func TestWatchLinkToDirectory(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "sub/b.yaml", clusterYAML("b", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		w.result(t)
		if err := os.Symlink("sub", filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		write(t, dir, "sub/b.yaml", clusterYAML("b", 2))
		w.until(t, want(t, map[string]string{"sub/b.yaml": clusterYAML("b", 2)}))
		write(t, dir, "sub/b.yaml", clusterYAML("b", 3))
		w.until(t, want(t, map[string]string{"sub/b.yaml": clusterYAML("b", 3)}))
	})
}

// TestWatchDirectoryReplaced: the directory renamed away and another put
// in its place (a deploy's swap), or removed and made again: Watch loads
// and then watches what is there now.
func TestWatchDirectoryReplaced(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "conf")
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		w.result(t)
		write(t, filepath.Join(parent, "conf.new"), "a.yaml", clusterYAML("a", 2))
		if err := os.Rename(dir, filepath.Join(parent, "conf.old")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(parent, "conf.new"), dir); err != nil {
			t.Fatal(err)
		}
		// A load between the two renames finds no directory: not
		// reported, since the second comes soon.
		for want := want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}); ; {
			r, err := w.next(t)
			if err != nil {
				t.Fatalf("a swap reported as %v", err)
			}
			if slices.Equal(versions(r), want) {
				break
			}
		}
		write(t, dir, "a.yaml", clusterYAML("a", 3))
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 3)}))

		// Removed: reported (its files' removals may load first, if their
		// events came apart from the directory's); then made again.
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := w.next(t); err != nil {
				break
			}
		}
		write(t, dir, "a.yaml", clusterYAML("a", 4))
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 4)}))
	})
}

// TestWatchDirectoryMadeLater: a directory that is not there when Watch
// starts is reported, then loaded and watched once it is made.
func TestWatchDirectoryMadeLater(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "conf")
		w := startWatch(t, configdir.NewLoader(dir), dir)
		if _, err := w.next(t); err == nil || !strings.Contains(err.Error(), "no such directory") {
			t.Fatalf("a directory that is not there: error %v, want one that says so", err)
		}
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1)}))
		write(t, dir, "a.yaml", clusterYAML("a", 2)) // watched now
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 2)}))
	})
}

// TestWatchReturnsWhenWatcherStops: a file watcher that fails for good
// ends Watch with an error rather than leaving it deaf.
func TestWatchReturnsWhenWatcherStops(t *testing.T) {
	for _, errs := range []bool{false, true} {
		fake := configdir.UseFakeNotifier(t)
		dir := t.TempDir()
		done := make(chan error, 1)
		go func() {
			done <- configdir.Watch(context.Background(), configdir.NewLoader(dir), dir, func(*configdir.Result) {}, func(error) {})
		}()
		fake.Stop(errs)
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("errors channel closed %v: Watch returned no error", errs)
			}
		case <-time.After(configdir.TestTimeout):
			t.Fatalf("errors channel closed %v: Watch still running", errs)
		}
	}
}

// truncatingFS is a directory whose file named in cut is emptied when it
// is next opened, as by a writer that truncates it just after the watcher
// looked at it and just before it is read.
type truncatingFS struct {
	fs.FS
	dir string
	mu  sync.Mutex
	cut string
}

func (f *truncatingFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(f.FS, name) }

func (f *truncatingFS) Open(name string) (fs.File, error) {
	f.mu.Lock()
	cut := f.cut == name
	if cut {
		f.cut = ""
	}
	f.mu.Unlock()
	if cut {
		if err := os.Truncate(filepath.Join(f.dir, name), 0); err != nil {
			return nil, err
		}
	}
	return f.FS.Open(name)
}

// TestWatchFileChangedWhileRead: a file that changes between the moment
// Watch looks at it and its read is not taken as read (here: empty, its
// cluster gone); it keeps what it held until the change's own event.
func TestWatchFileChangedWhileRead(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	write(t, dir, "b.yaml", clusterYAML("b", 1))
	fsys := &truncatingFS{FS: os.DirFS(dir), dir: dir}
	w := startWatch(t, configdir.NewFSLoader(fsys, dir), dir)
	w.result(t)
	fsys.mu.Lock()
	fsys.cut = "a.yaml"
	fsys.mu.Unlock()
	write(t, dir, "a.yaml", clusterYAML("a", 2))
	if got := versions(w.result(t)); !slices.Equal(got, want(t, map[string]string{"a.yaml": clusterYAML("a", 1), "b.yaml": clusterYAML("b", 1)})) {
		t.Fatalf("a.yaml emptied while read: %v, want what it held", got)
	}
}

// TestWatchDottedDirectoryMovedOut: a directory whose name has a dot
// ("example.com") moved out of the tree takes its files' resources with
// it, as any other directory does.
func TestWatchDottedDirectoryMovedOut(t *testing.T) {
	eachNotifier(t, func(t *testing.T) {
		dir, outside := t.TempDir(), t.TempDir()
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		write(t, dir, "example.com/b.yaml", clusterYAML("b", 1))
		w := startWatch(t, configdir.NewLoader(dir), dir)
		w.result(t)
		if err := os.Rename(filepath.Join(dir, "example.com"), filepath.Join(outside, "example.com")); err != nil {
			t.Fatal(err)
		}
		w.until(t, want(t, map[string]string{"a.yaml": clusterYAML("a", 1)}))
	})
}

// vanishFS is a directory whose subdirectory dir, listed, cannot be opened
// the next left times, as if removed between its listing and its reading.
type vanishFS struct {
	fs.FS
	dir  string
	left atomic.Int32
}

func (f *vanishFS) Open(name string) (fs.File, error) {
	if name == f.dir && f.left.Add(-1) >= 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return f.FS.Open(name)
}

// TestWatchDirectoryGoneWhenRead: a load that finds a directory gone as it
// walks (a tree being swapped) is neither served nor reported at once:
// Watch holds the error, walks again shortly, and serves the whole tree.
func TestWatchDirectoryGoneWhenRead(t *testing.T) {
	held := configdir.SetRejectAfter(t, time.Hour)
	dir := t.TempDir()
	files := map[string]string{"a.yaml": clusterYAML("a", 1), "sub/b.yaml": clusterYAML("b", 1)}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		write(t, dir, name, body)
	}
	f := &vanishFS{FS: os.DirFS(dir), dir: "sub"}
	f.left.Store(2)
	w := startWatch(t, configdir.NewFSLoader(f, dir), dir)
	if got, want := versions(w.result(t)), want(t, files); !slices.Equal(got, want) {
		t.Fatalf("first configuration served: %v, want %v", got, want)
	}
	select {
	case err := <-held:
		if !strings.Contains(err.Error(), "directory removed while it was read") {
			t.Fatalf("held %v", err)
		}
	default:
		t.Fatal("no rejection held")
	}
}
