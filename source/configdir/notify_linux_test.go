package configdir

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInotifyDropsMovedTree: a directory moved out of the tree stops being
// watched, and so do the directories below it, which would otherwise go on
// reporting under their old paths.
func TestInotifyDropsMovedTree(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "p", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	nf, err := newInotify()
	if err != nil {
		t.Fatal(err)
	}
	defer nf.close()
	n := nf.(*inotify)
	if err := addTree(n, rootPath(root)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "p"), filepath.Join(elsewhere, "p")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(testTimeout)
	for {
		select {
		case nts := <-n.notices():
			i := slices.IndexFunc(nts, func(nt notice) bool { return nt.moved })
			if i < 0 {
				continue
			}
			n.moved(nts[i])
			n.mu.Lock()
			defer n.mu.Unlock()
			for _, d := range n.dirs {
				if strings.HasPrefix(d.path, filepath.Join(root, "p")) {
					t.Fatalf("still watching %s", d.path)
				}
			}
			if len(n.dirs) != 1 {
				t.Fatalf("watching %v, want the root alone", n.dirs)
			}
			return
		case <-deadline:
			t.Fatal("no notice of the move within 10s")
		}
	}
}
