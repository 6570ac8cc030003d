package configdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// goneNotifier is a notifier whose add finds the directories named in gone
// removed already, as a tree being swapped removes them between the walk's
// listing and the watch; it records the others. Only add is used.
type goneNotifier struct {
	notifier
	gone  map[string]bool
	added []string
}

func (n *goneNotifier) add(dir string) error {
	if n.gone[dir] {
		return fmt.Errorf("watching %s: %w", dir, fs.ErrNotExist)
	}
	n.added = append(n.added, dir)
	return nil
}

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
		t.Errorf("root gone: addTree = %v, want fs.ErrNotExist", err)
	}
	if len(n.added) != 0 {
		t.Errorf("root gone: watched %v, want nothing", n.added)
	}
}
