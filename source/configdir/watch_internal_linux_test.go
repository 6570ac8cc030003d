package configdir

import (
	"os"
	"testing"
	"time"
)

// TestHiddenNamesForgottenAtLoad: a generator that makes uniquely named
// hidden temporary files and, on a failed run, removes one before closing
// it (inotify then reports the close by the name, after its removal)
// leaves nothing behind in what Watch remembers of hidden names.
func TestHiddenNamesForgottenAtLoad(t *testing.T) {
	dir := t.TempDir()
	n, err := newInotify()
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	if err := n.add(rootPath(dir)); err != nil {
		t.Fatal(err)
	}
	w := &watch{n: n, dir: dir, l: NewLoader(dir), apply: func(*Result) {}, reject: func(error) {},
		changed: map[string]bool{}, writing: map[string]time.Time{}, hidden: map[string]bool{}, links: map[string]bool{}}
	defer w.stopTimer()
	const runs = 100
	for range runs {
		f, err := os.CreateTemp(dir, ".a.yaml.tmp-*")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("resources: [")
		os.Remove(f.Name()) // the run failed: cleaned up, then closed (a deferred Close)
		f.Close()
	}
	// Take in the notices until the last run's close.
	deadline := time.After(testTimeout)
	for closes := 0; closes < runs; {
		select {
		case nts := <-n.notices():
			for _, nt := range nts {
				if nt.op == opClosed {
					closes++
				}
			}
			w.noticeAll(nts)
		case <-deadline:
			t.Fatalf("%d closes reported of %d", closes, runs)
		}
	}
	w.load()
	if len(w.hidden) != 0 || len(w.links) != 0 {
		t.Fatalf("remembered %d hidden names and %d links after %d temporary files came and went, want none", len(w.hidden), len(w.links), runs)
	}
}
