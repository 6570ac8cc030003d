package configdir

import (
	"errors"
	"fmt"

	"github.com/fsnotify/fsnotify"
)

// A notice is what a file watcher reports of one path: a file or
// directory in a watched directory, or the watched directory itself.
type notice struct {
	path string
	op   noticeOp
	// moved: path is a watched directory that was renamed (the notifier's
	// moved method decides whether to go on watching it); watch is the
	// notifier's own handle for it.
	moved bool
	watch int32
}

// noticeOp is what happened to a notice's path.
type noticeOp uint8

const (
	// opChanged: its attributes changed (or, from the portable notifier,
	// its contents).
	opChanged noticeOp = iota
	// opCreated: created (or, from the portable notifier, renamed to the
	// path).
	opCreated
	// opGone: removed, or renamed away from the path.
	opGone
	// opArrived: another file was renamed to the path. Only a notifier
	// that reports opClosed reports opArrived (the portable one reports
	// opCreated instead).
	opArrived
	// opWritten: its contents were modified; a writer may still have it
	// open. Only a notifier that reports opClosed reports opWritten (the
	// portable one reports opChanged instead).
	opWritten
	// opClosed: a writer closed it.
	opClosed
)

// notifier reports changes in the directories added to it (each one
// alone, not its subdirectories) until closed. It owns the goroutine that
// feeds its channels; close stops it.
type notifier interface {
	add(dir string) error
	// moved handles a notice that a watched directory was renamed, after
	// the notices before it: Watch has added the directory again if it is
	// still in the tree.
	moved(notice)
	// prune stops watching the directories that are no longer at the
	// path they were added by (a link to the directory given now leads to
	// another), where the notifier can tell.
	prune()
	// notices sends the notices in batches, in order: what one read of
	// the watcher found, so that a burst of events (a generator that
	// rewrites a thousand files) does not cost a hand-over per event. It
	// is closed if the notifier fails for good, after errors reported why.
	notices() <-chan []notice
	// errors reports failures of the watcher itself: notices may have
	// been lost.
	errors() <-chan error
	// reportsCloses reports whether the notifier reports a writer's close
	// (opClosed), so that Watch can wait for one.
	reportsCloses() bool
	close() error
}

// newNotifier makes the watcher Watch uses: Linux's inotify, which reports
// when a writer closes a file, on Linux, and fsnotify elsewhere. Tests
// switch it.
var newNotifier = defaultNotifier

// portable is a notifier on fsnotify, for any platform. It cannot tell when
// a writer is done, so a write is an opChanged notice, and a rename to a
// path (which fsnotify reports as a creation) an opCreated one.
type portable struct {
	w   *fsnotify.Watcher
	out chan []notice
	// done ends the translating goroutine; stopped is closed when it has.
	done, stopped chan struct{}
}

func newPortable() (notifier, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	p := &portable{w: w, out: make(chan []notice), done: make(chan struct{}), stopped: make(chan struct{})}
	go p.translate()
	return p, nil
}

// translate turns fsnotify's events into notices until closed.
func (p *portable) translate() {
	defer close(p.stopped)
	for {
		select {
		case <-p.done:
			return
		case ev, ok := <-p.w.Events:
			if !ok {
				close(p.out) // fsnotify failed, or is closing
				return
			}
			op := opChanged
			switch {
			case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
				op = opGone
			case ev.Has(fsnotify.Create):
				op = opCreated
			}
			select {
			case p.out <- []notice{{path: ev.Name, op: op}}:
			case <-p.done:
				return
			}
		}
	}
}

func (p *portable) add(dir string) error {
	if err := p.w.Add(dir); err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	return nil
}
func (p *portable) moved(notice)             {} // fsnotify drops the watch itself
func (p *portable) prune()                   {} // fsnotify watches by path
func (p *portable) notices() <-chan []notice { return p.out }
func (p *portable) errors() <-chan error     { return p.w.Errors }
func (p *portable) reportsCloses() bool      { return false }
func (p *portable) close() error {
	close(p.done)
	err := p.w.Close()
	<-p.stopped
	return err
}

// errOverflow is the error a notifier reports when the kernel dropped
// events.
var errOverflow = errors.New("file watcher: events lost (the kernel's queue overflowed)")
