package configdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// goneNotifier is a notifier whose add finds the directories named in gone
// removed already, as a tree being swapped removes them between the walk's
// listing and the watch, and fails with full's error for those named in
// full (the system's limit of watches); it records the others. Only add
// and prune are used.
type goneNotifier struct {
	notifier
	gone  map[string]bool
	full  map[string]error
	added []string
}

func (n *goneNotifier) add(dir string) error {
	if n.gone[dir] {
		return fmt.Errorf("watching %s: %w", dir, fs.ErrNotExist)
	}
	if err := n.full[filepath.Clean(dir)]; err != nil {
		return err
	}
	n.added = append(n.added, dir)
	return nil
}

func (n *goneNotifier) prune() {}

// TestAddTreeSkipsDirectoryGone: a subdirectory gone before it could be
// watched neither fails addTree nor stops its walk, so the directories
// after it are watched (the soak probe's "file watcher failed ... watching
// cfg/gen: no such file or directory", logged at a normal tree swap, after
// which the rest of the tree went unwatched); the root itself gone is an
// fs.ErrNotExist, for the callers that wait for it to come back.
func TestAddTreeSkipsDirectoryGone(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b", "gen/g1", "z/y"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n := &goneNotifier{gone: map[string]bool{filepath.Join(root, "gen"): true}}
	if err := addTree(n, root); err != nil {
		t.Fatalf("addTree: %v, want nil", err)
	}
	var want []string
	for _, d := range []string{"", "a", "a/b", "z", "z/y"} {
		want = append(want, filepath.Join(root, d))
	}
	if !slices.Equal(n.added, want) {
		t.Errorf("watched %v, want %v", n.added, want)
	}

	n = &goneNotifier{gone: map[string]bool{root: true}}
	if err := addTree(n, root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("root gone when watched: addTree = %v, want fs.ErrNotExist", err)
	}
	if len(n.added) != 0 {
		t.Errorf("root gone when watched: watched %v, want nothing", n.added)
	}
	n = &goneNotifier{}
	if err := addTree(n, rootPath(filepath.Join(root, "none"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("root not there: addTree = %v, want fs.ErrNotExist", err)
	}
}

// TestRewatchWithSubdirectoryUnwatched: when the directory's own name
// changed (swapped), a subdirectory that cannot be watched is reported as
// a WatcherError and the load goes on, rather than taken for the directory
// gone, which would apply no load until the directory's name changed
// again.
func TestRewatchWithSubdirectoryUnwatched(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	const cluster = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: a\ntype: STATIC\n"
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(cluster), 0o644); err != nil {
		t.Fatal(err)
	}
	limit := errors.New("no space left on device")
	applied := 0
	var rejected []error
	w := &watch{n: &goneNotifier{full: map[string]error{filepath.Join(dir, "sub"): limit}}, dir: dir, l: NewLoader(dir),
		apply: func(*Result) { applied++ }, reject: func(err error) { rejected = append(rejected, err) },
		changed: map[string]bool{}, writing: map[string]time.Time{}, closed: map[string]bool{}, unsure: map[string]time.Time{},
		hidden: map[string]bool{}, links: map[string]bool{}, full: true, rewatch: true}
	defer w.stopTimer()
	defer w.stopRejection()
	w.load()
	if applied != 1 || w.rewatch {
		t.Fatalf("applied %d loads, rewatch %v; want 1, false", applied, w.rewatch)
	}
	var we *WatcherError
	if len(rejected) != 1 || !errors.As(rejected[0], &we) || !errors.Is(we.Err, limit) {
		t.Errorf("rejected %v, want the WatcherError of sub", rejected)
	}
}
