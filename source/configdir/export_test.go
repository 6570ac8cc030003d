package configdir

import (
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testTimeout bounds every wait for something a test expects.
const testTimeout = 10 * time.Second

// TestTimeout is testTimeout, for the package's external tests.
const TestTimeout = testTimeout

// UsePortableWatcher makes Watch use fsnotify, as on platforms other than
// Linux, until the test ends.
func UsePortableWatcher(t testing.TB) {
	old := newNotifier
	newNotifier = newPortable
	t.Cleanup(func() { newNotifier = old })
}

// SetRejectAfter sets RejectAfter until the test ends, and returns a
// channel that receives each rejection Watch holds for it.
func SetRejectAfter(t testing.TB, d time.Duration) <-chan error {
	held := make(chan error, 64)
	oldAfter, oldHold := rejectAfter, onHold
	rejectAfter, onHold = d, func(err error) { held <- err }
	t.Cleanup(func() { rejectAfter, onHold = oldAfter, oldHold })
	return held
}

// SetWriteWait shortens WriteWait until the test ends.
func SetWriteWait(t testing.TB, d time.Duration) {
	old := writeWait
	writeWait = d
	t.Cleanup(func() { writeWait = old })
}

// FakeNotifier is a file watcher that reports only what the test tells it
// to.
type FakeNotifier struct {
	out  chan []notice
	errs chan error
	mu   sync.Mutex
	dirs []string // added
}

// UseFakeNotifier makes Watch use a FakeNotifier until the test ends.
func UseFakeNotifier(t testing.TB) *FakeNotifier {
	f := &FakeNotifier{out: make(chan []notice), errs: make(chan error)}
	old := newNotifier
	newNotifier = func() (notifier, error) { return f, nil }
	t.Cleanup(func() { newNotifier = old })
	return f
}

// FakeEvent is what a FakeNotifier reports of one path: Op is "changed",
// "created", "gone", "arrived", "written" or "closed" (see noticeOp).
type FakeEvent struct{ Path, Op string }

// Report reports events, in one batch, as one read of inotify would.
func (f *FakeNotifier) Report(events ...FakeEvent) {
	ops := map[string]noticeOp{"changed": opChanged, "created": opCreated, "gone": opGone, "arrived": opArrived,
		"written": opWritten, "closed": opClosed}
	nts := make([]notice, len(events))
	for i, ev := range events {
		op, ok := ops[ev.Op]
		if !ok {
			panic("FakeNotifier: no op " + ev.Op)
		}
		nts[i] = notice{path: ev.Path, op: op}
	}
	f.out <- nts
}

// CountLstat counts Watch's calls of os.Lstat until the test ends.
func CountLstat(t testing.TB) *atomic.Int64 {
	var n atomic.Int64
	old := lstat
	lstat = func(name string) (fs.FileInfo, error) {
		n.Add(1)
		return old(name)
	}
	t.Cleanup(func() { lstat = old })
	return &n
}

// Fail reports err as a failure of the watcher (events lost).
func (f *FakeNotifier) Fail(err error) { f.errs <- err }

// Watched returns the directories added, cleaned.
func (f *FakeNotifier) Watched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.dirs))
	for i, d := range f.dirs {
		out[i] = filepath.Clean(d)
	}
	return out
}

func (f *FakeNotifier) add(dir string) error {
	f.mu.Lock()
	f.dirs = append(f.dirs, dir)
	f.mu.Unlock()
	return nil
}
func (f *FakeNotifier) moved(notice)             {}
func (f *FakeNotifier) prune()                   {}
func (f *FakeNotifier) notices() <-chan []notice { return f.out }
func (f *FakeNotifier) errors() <-chan error     { return f.errs }
func (f *FakeNotifier) reportsCloses() bool      { return true }
func (f *FakeNotifier) close() error             { return nil }

// Stop closes the watcher's channels: notices, or errors if errs is set,
// as a watcher that failed for good does.
func (f *FakeNotifier) Stop(errs bool) {
	if errs {
		close(f.errs)
	} else {
		close(f.out)
	}
}

// LoadNamed is Load as Watch runs it after events that named the files
// named.
func LoadNamed(l *Loader, named ...string) (*Result, error) {
	l.named = make(map[string]bool)
	for _, n := range named {
		l.named[n] = true
	}
	defer func() { l.named = nil }()
	return l.Load()
}
