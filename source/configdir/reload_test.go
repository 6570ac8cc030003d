package configdir_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
)

// versions lists a result's resources as type, name and version, in order.
func versions(res *configdir.Result) []string {
	var out []string
	for _, r := range res.Resources {
		out = append(out, r.Type.Short+"/"+r.Name+"@"+r.Version)
	}
	return out
}

// TestReloadMatchesLoad reloads after changes of every kind (contents
// only, a broken and a mended reference, a resource renamed, a file added)
// and checks each result against a fresh Load of the same directory.
func TestReloadMatchesLoad(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		write(t, dir, fmt.Sprintf("eds/c%d.yaml", i), clusterYAML(fmt.Sprintf("c%d", i), 1000+i))
	}
	l := configdir.NewLoader(dir)
	if _, err := l.Load(); err != nil {
		t.Fatal(err)
	}
	check := func(step string, paths ...string) {
		t.Helper()
		got, err := l.Reload(paths)
		want, werr := load(t, dir)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%s: Reload error %v, Load error %v", step, err, werr)
		}
		if err != nil {
			if err.Error() != werr.Error() {
				t.Fatalf("%s: Reload error\n%v\nLoad error\n%v", step, err, werr)
			}
			return
		}
		if !slices.Equal(versions(got), versions(want)) || got.Files != want.Files {
			t.Fatalf("%s: Reload gave %v (%d files), Load %v (%d files)", step, versions(got), got.Files, versions(want), want.Files)
		}
		if got.Took <= 0 || want.Took <= 0 {
			t.Fatalf("%s: Reload took %v, Load %v", step, got.Took, want.Took)
		}
	}
	write(t, dir, "eds/c3.yaml", clusterYAML("c3", 2003))
	check("contents changed", "eds/c3.yaml")
	write(t, dir, "eds/c1.yaml", clusterYAML("c1", 2001))
	write(t, dir, "eds/c4.yaml", clusterYAML("c4", 2004))
	check("two files' contents changed", "eds/c1.yaml", "eds/c4.yaml")

	// The cluster now asks for endpoints that do not exist: rejected, as
	// Load rejects it, naming the file.
	broken := "resources:" + strings.Replace(fmt.Sprintf(cluster, "c2"), "eds_config: {ads: {}}", "eds_config: {ads: {}}, service_name: nowhere", 1) +
		fmt.Sprintf(endpoints, "c2", 1002)
	write(t, dir, "eds/c2.yaml", broken)
	_, err := l.Reload([]string{"eds/c2.yaml"})
	if ps := problems(t, err); len(ps) != 1 || ps[0].File != "eds/c2.yaml" || !strings.Contains(ps[0].Reason, `"nowhere"`) {
		t.Fatalf("problems %+v, want one in eds/c2.yaml about \"nowhere\"", ps)
	}
	write(t, dir, "eds/c2.yaml", clusterYAML("c2", 3002))
	check("reference mended", "eds/c2.yaml")

	// Renamed: not the same resources any more.
	write(t, dir, "eds/c0.yaml", clusterYAML("renamed", 1000))
	check("resource renamed", "eds/c0.yaml")
	write(t, dir, "eds/c9.yaml", clusterYAML("c9", 1009))
	check("file added", "eds/c9.yaml")
	write(t, dir, "eds/c9.yaml", clusterYAML("c9", 2009))
	check("contents changed after a full assembly", "eds/c9.yaml")
	// A duplicate of another file's resource, then gone again.
	write(t, dir, "eds/c9.yaml", clusterYAML("c1", 2009))
	check("duplicate", "eds/c9.yaml")
	write(t, dir, "eds/c9.yaml", clusterYAML("c9", 4009))
	check("duplicate gone", "eds/c9.yaml")
	if err := os.Remove(filepath.Join(dir, "eds/c9.yaml")); err != nil {
		t.Fatal(err)
	}
	check("file removed", "eds/c9.yaml")
	write(t, dir, "eds/c9.yaml", clusterYAML("c9", 5009))
	if err := os.Remove(filepath.Join(dir, "eds/c3.yaml")); err != nil {
		t.Fatal(err)
	}
	check("a file added and another removed", "eds/c9.yaml", "eds/c3.yaml")
	if got, err := l.Reload(nil); err != nil || len(got.Resources) != 10 {
		t.Fatalf("reload of nothing: %v, %d resources", err, len(got.Resources))
	}

	// Many files at once, read side by side: a change to every one, then
	// one broken among them (the problems Load finds, in its order), then
	// files added and removed with others changed.
	var many []string
	for i := range 40 {
		p := fmt.Sprintf("many/m%02d.yaml", i)
		write(t, dir, p, clusterYAML(fmt.Sprintf("m%02d", i), 100+i))
		many = append(many, p)
	}
	check("forty files added", many...)
	for i, p := range many {
		write(t, dir, p, clusterYAML(fmt.Sprintf("m%02d", i), 200+i))
	}
	check("forty files changed", many...)
	for i, p := range many {
		body := clusterYAML(fmt.Sprintf("m%02d", i), 300+i)
		if i%13 == 5 {
			body = "resources: ["
		}
		write(t, dir, p, body)
	}
	check("three of forty broken", many...)
	for i, p := range many {
		write(t, dir, p, clusterYAML(fmt.Sprintf("m%02d", i), 400+i))
	}
	for _, p := range many[30:] {
		if err := os.Remove(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	check("forty mended, ten of them removed", append(many, many[35])...)
}

// failFS is a directory whose files named in fail cannot be opened.
type failFS struct {
	fs.FS
	fail map[string]bool
}

func (f failFS) Open(name string) (fs.File, error) {
	if f.fail[name] {
		return nil, errors.New("injected failure")
	}
	return f.FS.Open(name)
}

// TestReloadAfterAFailedReload: a reload that fails part way, after it
// has read some files, must not leave later reloads starting from the
// configuration before those files.
func TestReloadAfterAFailedReload(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		write(t, dir, n+".yaml", clusterYAML(n, 1))
	}
	fsys := failFS{FS: os.DirFS(dir), fail: map[string]bool{}}
	l := configdir.NewFSLoader(fsys, dir)
	if _, err := l.Load(); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.yaml", clusterYAML("a", 2))
	write(t, dir, "b.yaml", clusterYAML("b", 2))
	fsys.fail["b.yaml"] = true
	if _, err := l.Reload([]string{"a.yaml", "b.yaml"}); err == nil {
		t.Fatal("reload with an unreadable file succeeded")
	}
	delete(fsys.fail, "b.yaml")
	write(t, dir, "c.yaml", clusterYAML("c", 2))
	got, err := l.Reload([]string{"c.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	// b.yaml was not read again: its old contents stand, as a watcher
	// that missed it would leave them; a.yaml's and c.yaml's new ones
	// must be there.
	gotV, wantV := versions(got), versions(want)
	for i := range gotV {
		if strings.Contains(gotV[i], `/b@`) {
			continue
		}
		if gotV[i] != wantV[i] {
			t.Fatalf("after a failed reload: %v, want %v (but for b)", gotV, wantV)
		}
	}
}

// raceFS is a directory whose files can be listed and stated but, for
// those named in gone, not opened as they no longer exist (removed between
// listing and reading) and, for those named in broken, not read at all.
type raceFS struct {
	fs.FS
	gone, broken map[string]bool
}

func (f raceFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(f.FS, name) }

func (f raceFS) Open(name string) (fs.File, error) {
	switch {
	case f.gone[name]:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case f.broken[name]:
		return nil, errors.New("injected read failure")
	}
	return f.FS.Open(name)
}

// TestReloadGoneOrBrokenWhenRead: a file gone between its event and its
// read is removed with its resources, a path listed twice is read once, and
// a file that cannot be read fails Reload and Load.
func TestReloadGoneOrBrokenWhenRead(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		write(t, dir, n+".yaml", clusterYAML(n, 1))
	}
	f := raceFS{FS: os.DirFS(dir), gone: map[string]bool{}, broken: map[string]bool{}}
	l := configdir.NewFSLoader(f, dir)
	if _, err := l.Load(); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.yaml", clusterYAML("a", 2))
	write(t, dir, "b.yaml", clusterYAML("b", 2))
	write(t, dir, "d.yaml", clusterYAML("d", 2)) // as many files as before, once b is gone
	f.gone["b.yaml"] = true
	got, err := l.Reload([]string{"a.yaml", "b.yaml", "d.yaml", "a.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	want, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions(got), versions(want)) || got.Reread != 2 {
		t.Fatalf("Reload gave %v (%d files read), Load %v", versions(got), got.Reread, versions(want))
	}

	write(t, dir, "c.yaml", clusterYAML("c", 3))
	f.broken["c.yaml"] = true
	if _, err := l.Reload([]string{"c.yaml"}); err == nil || !strings.Contains(err.Error(), "injected read failure") {
		t.Fatalf("Reload of an unreadable file: %v", err)
	}
	if _, err := l.Load(); err == nil || !strings.Contains(err.Error(), "injected read failure") {
		t.Fatalf("Load with an unreadable changed file: %v", err)
	}
	delete(f.broken, "c.yaml")
	got, err = l.Load()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ = load(t, dir); !slices.Equal(versions(got), versions(want)) {
		t.Fatalf("mended: Load gave %v, want %v", versions(got), versions(want))
	}
}

// TestReloadSameBytesKeepsResources: a file rewritten with the bytes it
// held (a generator that rewrites every file) keeps its resources, the
// same values, without being parsed again; a file with new bytes gets new
// ones; a broken file rewritten unchanged keeps its problems; and one
// mended back to bytes it held before it broke is parsed again.
func TestReloadSameBytesKeepsResources(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	write(t, dir, "b.yaml", clusterYAML("b", 1))
	l := configdir.NewLoader(dir)
	first, err := l.Load()
	if err != nil {
		t.Fatal(err)
	}
	byName := func(res *configdir.Result) map[string]*resource.Resource {
		m := map[string]*resource.Resource{}
		for _, r := range res.Resources {
			m[r.Type.Short+"/"+r.Name] = r
		}
		return m
	}
	was := byName(first)
	write(t, dir, "a.yaml", clusterYAML("a", 1)) // same bytes, a new file
	write(t, dir, "b.yaml", clusterYAML("b", 2))
	got, err := l.Reload([]string{"a.yaml", "b.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	now := byName(got)
	if now["cds/a"] != was["cds/a"] || now["eds/a"] != was["eds/a"] {
		t.Fatal("a file rewritten with the same bytes was parsed again")
	}
	if now["eds/b"] == was["eds/b"] || now["eds/b"].Version == was["eds/b"].Version {
		t.Fatal("a file with new bytes kept its old resources")
	}
	if got.Reread != 2 {
		t.Fatalf("%d files read, want 2", got.Reread)
	}
	write(t, dir, "b.yaml", "resources: [")
	_, err = l.Reload([]string{"b.yaml"})
	broken := problems(t, err)
	write(t, dir, "b.yaml", "resources: [") // broken the same way: the same problems
	_, err = l.Reload([]string{"b.yaml"})
	if again := problems(t, err); !slices.Equal(again, broken) {
		t.Fatalf("a broken file rewritten unchanged: problems %v, want %v", again, broken)
	}
	write(t, dir, "b.yaml", "resources: [")
	if _, err := l.Load(); err == nil {
		t.Fatal("Load accepted a broken file rewritten unchanged")
	}
	write(t, dir, "b.yaml", clusterYAML("b", 2)) // the bytes it held before it broke
	got, err = l.Reload([]string{"b.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := load(t, dir); !slices.Equal(versions(got), versions(want)) {
		t.Fatalf("mended: %v, want %v", versions(got), versions(want))
	}
	if byName(got)["eds/b"] == now["eds/b"] {
		t.Fatal("a file mended to bytes it held before it broke was not parsed again")
	}
}

// TestReloadSameSizeAndTimeOtherBytes: a file rewritten in place with as
// many bytes and its modification time put back (cp -p, rsync -t, a build
// that pins file times) is read again, by a load of it alone and by a
// walk: its change time moved, which no writer can set. Before, its size,
// modification time and inode called it unchanged, for good.
func TestReloadSameSizeAndTimeOtherBytes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("change times are read on Linux")
	}
	for _, walk := range []bool{false, true} {
		t.Run(fmt.Sprintf("walk=%v", walk), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.yaml")
			pinned := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			write(t, dir, "a.yaml", clusterYAML("a", 1001))
			if err := os.Chtimes(path, pinned, pinned); err != nil {
				t.Fatal(err)
			}
			l := configdir.NewLoader(dir)
			if _, err := l.Load(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(clusterYAML("a", 1002)), 0o644); err != nil { // in place, as many bytes
				t.Fatal(err)
			}
			if err := os.Chtimes(path, pinned, pinned); err != nil {
				t.Fatal(err)
			}
			var res *configdir.Result
			var err error
			if walk {
				res, err = l.Load()
			} else {
				res, err = l.Reload([]string{"a.yaml"})
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := versions(res), want(t, map[string]string{"a.yaml": clusterYAML("a", 1002)}); !slices.Equal(got, want) {
				t.Fatalf("a.yaml rewritten with as many bytes and its time put back: %v, want %v", got, want)
			}
		})
	}
}

// TestLoadDirectoryGoneWhenRead: a directory listed but gone when read (a
// tree being swapped) fails the load, naming it, rather than dropping its
// files, which may be back a moment later; the next load finds them.
func TestLoadDirectoryGoneWhenRead(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", clusterYAML("a", 1))
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "sub/b.yaml", clusterYAML("b", 1))
	f := raceFS{FS: os.DirFS(dir), gone: map[string]bool{}, broken: map[string]bool{}}
	l := configdir.NewFSLoader(f, dir)
	first, err := l.Load()
	if err != nil {
		t.Fatal(err)
	}
	f.gone["sub"] = true
	if _, err := l.Load(); err == nil || !strings.Contains(err.Error(), "directory removed while it was read") ||
		!strings.Contains(err.Error(), "sub") {
		t.Fatalf("Load with a directory gone while it walked: %v, want it failed, naming sub", err)
	}
	delete(f.gone, "sub")
	got, err := l.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions(got), versions(first)) {
		t.Fatalf("Load with the directory back gave %v, want %v", versions(got), versions(first))
	}
}
