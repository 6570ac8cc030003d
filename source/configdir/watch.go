package configdir

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Debounce is how long Watch waits after a file event for more of the same
// burst before reloading (longer in a long burst: see Settle): long enough
// to gather the events of a writer that renames several files into place
// at once (microseconds apart; a Kubernetes ConfigMap's swap of its data
// directory is one burst), short enough not to matter next to pushing the
// change. MaxDelay bounds the wait under a continuous stream of events.
const (
	Debounce = time.Millisecond
	MaxDelay = 100 * time.Millisecond
)

// Settle bounds how long Watch waits after the last event of a long burst:
// an eighth of the burst's length so far, when that is more than Debounce.
// A writer that puts many files in place (a generator writing hundreds of
// endpoint files) may pause for more than Debounce, descheduled,
// or the watcher's reading of events may fall behind it; a load in that
// pause would push its change in two parts, the second a whole fan-out
// later.
const Settle = 5 * time.Millisecond

// WriteWait bounds how long Watch leaves a file alone while a writer has
// it open (on Linux, which reports a writer's close): a file written in
// place (truncated, then written) is read once its writer closes it, or
// once WriteWait passed without a write to it. Until then it keeps what it
// held when last read; the other files of a change load without it.
const WriteWait = 10 * time.Second

// RootRetry is how often Watch looks for its directory while it is gone
// (removed, or renamed away with nothing put in its place yet), or not
// there yet when Watch starts.
const RootRetry = time.Second

// RejectAfter is how long a configuration with problems, found after one
// loaded, must stand before Watch reports it: a writer's next step may mend
// it, and until then the last good one serves anyway. One found in the
// first load is reported at once.
const RejectAfter = time.Second

// rejectAfter is RejectAfter; tests shorten it.
var rejectAfter = RejectAfter

// writeWait is WriteWait; tests shorten it.
var writeWait = WriteWait

// unsureLook is how soon Watch looks again at a file that events named
// but a load found open for writing (see writerOpen), and unsureFor how
// long it keeps doing so with no write reported before it reads the file.
const (
	unsureLook = Settle
	unsureFor  = MaxDelay
)

// Watch reloads the loader's directory dir whenever a file in it (or in
// its subdirectories) changes, and calls apply with each configuration that
// loads or reject with each error, until ctx is done. It loads once at the
// start. apply and reject run on Watch's goroutine; a failure of the file
// watcher itself comes to reject as a *WatcherError, which rejects no
// configuration. A load that fails to read the directory (not one that
// finds problems in its files), or an error from the file watcher (events
// lost), makes the next load, on the next event, walk the whole directory: a file that stays unreadable then
// fails every load until it is mended. dir's parent is watched for dir's
// own name: a directory renamed into place, made again, or a link given as
// dir made to lead elsewhere, is loaded and watched at once. A directory
// that is not there is reported (at the start at once, later once it has
// been gone for a RootRetry), looked for every RootRetry, and loaded and
// watched once it is.
//
// A configuration with problems is reported to reject at once if it is
// the first to load, and otherwise only once it has stood for RejectAfter
// (see holdRejection).
//
// A file written in place is read once its writer closes it (or after
// writeWait without a write), where the notifier reports closes (Linux):
// one it saw written, and one a walk finds open for writing (when Watch
// starts, or in a directory made a moment before it was watched).
//
// Files named with a leading "." are a writer's temporary files and are
// ignored, except a symbolic link or a directory: one put in place, swapped
// or removed (a Kubernetes ConfigMap volume swaps its "..data" link) makes
// Watch walk the directory, reading every file whose link now leads
// elsewhere.
func Watch(ctx context.Context, l *Loader, dir string, apply func(*Result), reject func(error)) error {
	n, err := newNotifier()
	if err != nil {
		return err
	}
	defer n.close()
	rootGone := false
	if err := addTree(n, rootPath(dir)); errors.Is(err, fs.ErrNotExist) {
		rootGone = true // not there (yet): waited for below
	} else if err != nil {
		reject(&WatcherError{err}) // some directory left unwatched: found by walks
	}
	// The parent too, for what becomes of dir's own name: a link swapped
	// to another directory, or a directory renamed into place, made or
	// removed. Best effort: without it, such a change is found within a
	// RootRetry once the old directory goes, and not before.
	if parent := filepath.Dir(filepath.Clean(dir)); parent != filepath.Clean(dir) {
		_ = n.add(parent)
	}
	l.watched = true
	w := &watch{n: n, dir: dir, l: l, apply: apply, reject: reject, changed: map[string]bool{}, writing: map[string]time.Time{},
		closed: map[string]bool{}, unsure: map[string]time.Time{}, hidden: map[string]bool{}, links: map[string]bool{}, full: true}
	if n.reportsCloses() { // else a file found open could only wait out writeWait
		l.writerOpen = w.writerOpen
		defer func() { l.writerOpen = nil }()
	}
	if rootGone {
		// Not there yet: looked for every RootRetry, as if it went, but
		// reported at once.
		w.rewatch, w.missing = true, 1
	}
	if wait := w.load(); wait > 0 {
		w.schedule(wait)
	}
	for {
		select {
		case <-ctx.Done():
			w.stopTimer()
			w.stopRejection()
			return nil
		case nts, ok := <-n.notices():
			if !ok {
				return errors.New("file watcher stopped")
			}
			w.noticeAll(nts)
		case <-w.fire:
			w.timer, w.fire = nil, nil
			w.drain() // what happened up to now, a write begun say, before reading
			if wait := w.load(); wait > 0 {
				w.schedule(wait)
			}
		case <-w.heldFire:
			err := w.held
			w.held, w.heldTimer, w.heldFire = nil, nil, nil
			w.reject(err)
		case <-l.rescan:
			w.full = true
			w.schedule(Debounce)
		case err, ok := <-n.errors():
			if !ok {
				return errors.New("file watcher stopped")
			}
			// Events may have been lost (the kernel's queue overflowed):
			// watch any directory created meanwhile and walk the directory
			// for whatever changed.
			reject(&WatcherError{err})
			if err := addTree(n, rootPath(dir)); err != nil {
				reject(&WatcherError{err})
			}
			w.full = true
			w.schedule(Debounce)
		}
	}
}

// WatcherError is a failure of Watch's file watcher: events were lost
// (Watch then walks the directory), or a directory could not be watched
// (the system's limit of inotify watches, say), so changes in it go
// unseen until a walk. It rejects no configuration: the one served stays.
type WatcherError struct {
	// Err is the watcher's failure.
	Err error
}

// Error says that the watcher failed, and why.
func (e *WatcherError) Error() string {
	return "watching the configuration directory: " + e.Err.Error()
}

// Unwrap returns the watcher's error.
func (e *WatcherError) Unwrap() error { return e.Err }

// watch is Watch's state between events. Only Watch's goroutine uses it,
// but for writerOpen, which the Loader's readers call during a load, while
// that goroutine waits: it reads dir and closed.
type watch struct {
	n       notifier
	dir     string // the directory watched
	l       *Loader
	apply   func(*Result)
	reject  func(error)
	changed map[string]bool      // files named by events since the last load
	writing map[string]time.Time // files a writer modified and has not closed: when last modified
	// closed holds the files whose writer's close was taken in since the
	// last load: a walk that finds one open for writing takes it for
	// unsure (see writerOpen), not for a writer to wait for.
	closed map[string]bool
	// unsure holds the files a load found unsure, and when the first
	// such load was: looked at again every unsureLook, and read once
	// their writer is gone or unsureFor passed without a write.
	unsure map[string]time.Time
	// hidden holds the hidden names events named since the last load:
	// true if one made the name (created, or renamed to it) after the
	// last that took it away. links holds the hidden links there were
	// when last looked at (see load).
	hidden, links map[string]bool
	full          bool        // walk the directory: a directory changed, or a read failed
	rewatch       bool        // watch the directory again: it moved, went, or its name changed
	missing       int         // the looks in a row that found it not there
	timer         *time.Timer // armed while a load is due; fire is its channel
	fire          <-chan time.Time
	first         time.Time // the first event of the burst the timer waits out
	loaded        bool      // a configuration loaded
	// held is a configuration's problems not reported yet (see
	// holdRejection): heldFire, heldTimer's channel, reports it.
	held      error
	heldTimer *time.Timer
	heldFire  <-chan time.Time
}

// noticeAll takes in a batch of notices, in order.
func (w *watch) noticeAll(nts []notice) {
	for _, nt := range nts {
		w.notice(nt)
	}
}

// notice takes in what the notifier reported of one path.
func (w *watch) notice(nt notice) {
	rel, err := filepath.Rel(w.dir, nt.path)
	if err != nil {
		return
	}
	if nt.moved {
		w.n.moved(nt) // a directory renamed: its parent's notice (or the root's below) walks again
	}
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		// Another name in the parent, watched for the directory's own;
		// or the parent itself, which moved or went with the directory
		// (and its watches, which moved dropped).
		if rel == ".." && nt.op == opGone {
			w.full, w.rewatch = true, true
			w.schedule(w.quiet(time.Now()))
		}
		return
	}
	switch {
	case rel == ".":
		// The directory itself moved or went: the next load watches what
		// is there now, if anything (reading it fails otherwise, and says
		// so).
		w.full, w.rewatch = true, true
	case IsConfigFile(rel):
		w.changed[rel] = true
		switch nt.op {
		case opWritten:
			w.writing[rel] = time.Now()
		case opClosed, opGone, opArrived:
			delete(w.writing, rel)
			w.closed[rel] = nt.op == opClosed
		}
	case nt.moved:
	case strings.HasPrefix(filepath.Base(rel), "."):
		// A writer's temporary file, or a link (or a directory) the
		// files lead through, put in place, swapped or removed (a
		// Kubernetes ConfigMap swaps its "..data"). Only what makes or
		// takes away the name counts: load looks at the names there,
		// and the links that went. Writes and closes say nothing of what
		// the name is now: inotify reports them by the name a writer
		// opened, after a link took its place.
		switch nt.op {
		case opCreated, opArrived:
			w.hidden[filepath.Clean(nt.path)] = true
		case opGone:
			w.hidden[filepath.Clean(nt.path)] = false
		default:
			return
		}
	default:
		// A directory created, removed or renamed: walk again. A link to
		// a directory is not followed, as Load does not follow it.
		if info, err := os.Lstat(nt.path); err == nil && info.IsDir() {
			if err := addTree(w.n, nt.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				w.reject(&WatcherError{err}) // gone already: the walk below finds what is there
			}
		} else if filepath.Ext(rel) != "" && !w.l.holdsUnder(filepath.ToSlash(rel)) {
			return // some other file, not a directory ("example.com") moved away
		}
		w.full = true
	}
	w.schedule(w.quiet(time.Now()))
}

// drain takes in the notices already waiting, without blocking.
func (w *watch) drain() {
	for {
		select {
		case nts, ok := <-w.n.notices():
			if !ok {
				return // Watch's loop returns on it
			}
			w.noticeAll(nts)
		default:
			return
		}
	}
}

// quiet returns how long a burst must be quiet after an event seen at now
// for the load to begin: Debounce, or up to Settle in a long burst.
func (w *watch) quiet(now time.Time) time.Duration {
	if w.timer == nil {
		return Debounce
	}
	return min(max(Debounce, now.Sub(w.first)/8), Settle)
}

// schedule arms the load for a change seen now: wait after it (quiet after
// the last event of a burst), at most MaxDelay after the burst's first
// event.
func (w *watch) schedule(wait time.Duration) {
	now := time.Now()
	if w.timer == nil {
		w.first = now
		w.timer = time.NewTimer(wait)
		w.fire = w.timer.C
		return
	}
	if rest := MaxDelay - now.Sub(w.first); rest < wait {
		wait = max(rest, 0)
	}
	w.timer.Reset(wait)
}

func (w *watch) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// load loads what changed, leaving out the files that writers still have
// open (see WriteWait), and returns how long until the first of those
// falls due, or 0 if there is none.
func (w *watch) load() time.Duration {
	w.lookAtHidden()
	now := time.Now()
	var held map[string]bool
	var due time.Duration
	for rel, at := range w.writing {
		left := writeWait - now.Sub(at)
		if left <= 0 {
			delete(w.writing, rel) // a writer idle this long: read what it wrote
			continue
		}
		if held == nil {
			held = make(map[string]bool)
		}
		held[rel] = true
		if due == 0 || left < due {
			due = left
		}
	}
	paths := make([]string, 0, len(w.changed))
	for rel := range w.changed {
		if !held[rel] {
			paths = append(paths, rel)
			delete(w.changed, rel)
		}
	}
	if w.rewatch {
		if err := addTree(w.n, rootPath(w.dir)); !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				w.reject(&WatcherError{err}) // there, but not all of it watched
			}
			w.rewatch, w.missing = false, 0
			w.n.prune() // what the directory was, if it is now another
		} else {
			// Gone: look again every RootRetry, in case no event says it
			// is back (its parent could not be watched). The first look
			// waits, for a swap puts the new one in place a moment later
			// (its parent's event brings the next load); the second
			// reports it gone; the others wait for it.
			if due == 0 || due > RootRetry {
				due = RootRetry
			}
			if w.missing++; w.missing != 2 {
				return due
			}
		}
	}
	if !w.full && len(paths) == 0 {
		return due
	}
	var res *Result
	var err error
	w.l.held = held
	if w.full {
		w.l.named = make(map[string]bool, len(paths)) // Reload takes paths as named
		for _, rel := range paths {
			w.l.named[rel] = true
		}
		res, err = w.l.Load()
	} else {
		res, err = w.l.Reload(paths)
	}
	w.l.held, w.l.named = nil, nil
	clear(w.closed)
	for _, wr := range w.l.writers { // files a walk found open for writing: read once closed
		w.writing[wr.rel], w.changed[wr.rel] = wr.at, true
		if left := writeWait - now.Sub(wr.at); due == 0 || left < due {
			due = max(left, time.Millisecond)
		}
	}
	w.l.writers = w.l.writers[:0]
	unsure := make(map[string]time.Time, len(w.l.unsure))
	for _, rel := range w.l.unsure { // looked at again shortly
		first, ok := w.unsure[rel]
		if !ok {
			first = now
		}
		unsure[rel], w.changed[rel] = first, true
		if due == 0 || unsureLook < due {
			due = unsureLook
		}
	}
	w.unsure = unsure
	w.l.unsure = w.l.unsure[:0]
	// A read that failed (not a configuration with problems, whose files
	// were all read) may have left changed files unread: the next load
	// walks the directory and reads whatever changed.
	var problems *Error
	w.full = err != nil && !errors.As(err, &problems)
	vanished := errors.Is(err, errVanished)
	if vanished && (due == 0 || Settle < due) {
		due = Settle // walk again once the swap is done
	}
	switch {
	case err == nil:
		if !w.first.IsZero() {
			res.Waited = now.Sub(w.first)
		}
		w.loaded = true
		w.stopRejection()
		w.apply(res)
	case problems != nil && w.loaded, vanished:
		// Held: a writer's next step may mend it (a tree being swapped
		// is whole again by the next walk, after Settle).
		w.holdRejection(err)
	default:
		w.stopRejection() // this newer error is the one to report
		w.reject(err)
	}
	return due
}

// holdRejection holds a configuration with problems, found after one
// loaded, for rejectAfter before it is reported: one that a writer's next
// step mends (an endpoints file written a moment after its cluster's, a
// file removed and written again, a temporary file renamed over the one
// it duplicates) is then not reported at all, as it was never served. A
// later one replaces it; the first one's time stands.
func (w *watch) holdRejection(err error) {
	if w.held == nil {
		w.heldTimer = time.NewTimer(rejectAfter)
		w.heldFire = w.heldTimer.C
	}
	w.held = err
	if onHold != nil {
		onHold(err)
	}
}

// onHold, if set (by tests), is called with each rejection held.
var onHold func(error)

// stopRejection drops a held rejection: the configuration loaded since.
func (w *watch) stopRejection() {
	if w.heldTimer != nil {
		w.heldTimer.Stop()
	}
	w.held, w.heldTimer, w.heldFire = nil, nil, nil
}

// writerOpen is the Loader's writerOpen. A file open for writing is
// unsure when events named it (a load of the files they named, or a walk
// after its writer's close was taken in): a writer letting go (the kernel
// reports a close first), one that renamed it into place and has yet to
// close it, or a new one whose writes' events are on their way; each
// brings an event or lets go soon. So is one that was unsure, until
// unsureFor has passed: open all along and written nothing since, it is
// read as it is. A walk otherwise waits for a writer that has the file
// open and wrote it less than writeWait ago, as for a writer seen
// writing. It returns when the file was last written, for a writer
// waited for. It runs on the Loader's readers while Watch's goroutine
// waits.
func (w *watch) writerOpen(rel string, walk bool) (time.Time, writerState) {
	at, open := writtenAt(filepath.Join(w.dir, rel))
	first, wasUnsure := w.unsure[rel]
	switch {
	case !open:
		return at, noWriter
	case wasUnsure:
		if time.Since(first) < unsureFor {
			return at, unsure
		}
		return at, noWriter
	case !walk || w.closed[rel]:
		return at, unsure
	case time.Since(at) < writeWait:
		return at, writing
	}
	return at, noWriter
}

// addTree watches dir and its subdirectories, skipping hidden ones. Links
// are not followed (Load does not follow links to directories either),
// except dir itself when given as rootPath makes it.
//
// A subdirectory gone before it could be watched (a tree being swapped)
// is skipped: the walk goes on to the others, and the load that follows
// finds what is there now. Any other failure (the system's limit of
// watches) does not stop the walk either; the first is returned. The
// error is an fs.ErrNotExist only when dir itself is not there.
func addTree(n notifier, dir string) error {
	var first error
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil && path == dir {
			first = err // dir not there, or not readable
			return filepath.SkipAll
		}
		if err != nil || !d.IsDir() {
			return nil
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if err := n.add(path); err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			if first == nil {
				first = err
			}
			if path == dir {
				return filepath.SkipAll
			}
		}
		return nil
	})
	return first
}

// lookAtHidden sets full if a hidden name events named since the last
// load is, or was, a link or a directory: files may lead elsewhere now,
// or nowhere. A name that came and went (a writer's temporary file renamed
// into place) and was no link costs nothing; one still there, a look.
// After a walk's load it takes stock of the links again.
func (w *watch) lookAtHidden() {
	for path, there := range w.hidden {
		wasLink := w.links[path]
		delete(w.links, path)
		if !there {
			w.full = w.full || wasLink
			continue
		}
		info, err := lstat(path)
		switch {
		case err != nil:
			w.full = w.full || wasLink
		case info.Mode()&fs.ModeSymlink != 0:
			w.links[path] = true
			w.full = true
		case info.IsDir():
			w.full = true
		default:
			w.full = w.full || wasLink
		}
	}
	clear(w.hidden)
	if w.full {
		w.links = hiddenLinks(w.dir)
	}
}

// hiddenLinks returns the hidden links in dir and its subdirectories,
// skipping hidden ones, as addTree does.
func hiddenLinks(dir string) map[string]bool {
	links := map[string]bool{}
	root := rootPath(dir)
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && path != root && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.Type()&fs.ModeSymlink != 0 && strings.HasPrefix(d.Name(), "."):
			links[filepath.Clean(path)] = true
		}
		return nil
	})
	return links
}

// lstat is os.Lstat; tests count its calls.
var lstat = os.Lstat

// rootPath is dir ending in a separator, so that addTree (and the file
// watcher) follow it if it is a link to a directory.
func rootPath(dir string) string {
	return strings.TrimSuffix(dir, string(filepath.Separator)) + string(filepath.Separator)
}
