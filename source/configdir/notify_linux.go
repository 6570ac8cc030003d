package configdir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

func defaultNotifier() (notifier, error) { return newInotify() }

// inotifyMask is what inotify reports of a watched directory: its entries'
// creation, removal, renames, writes, closes after writing and attribute
// changes, and the directory's own removal or rename.
const inotifyMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// inotify is a notifier on Linux's inotify. Unlike fsnotify it reports a
// writer's close (IN_CLOSE_WRITE), so that Watch can wait for a file
// written in place to be whole.
type inotify struct {
	fd   int      // the inotify instance; file owns it
	file *os.File // fd, non-blocking, read through the runtime's poller
	out  chan []notice
	errs chan error
	// done ends the reading goroutine; stopped is closed when it has.
	done, stopped chan struct{}

	mu   sync.Mutex           // guards dirs: add runs on Watch's goroutine, read on its own
	dirs map[int32]watchedDir // by watch descriptor
}

// watchedDir is a directory inotify watches.
type watchedDir struct {
	path string
	ino  uint64 // its inode, when added
}

func newInotify() (notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	n := &inotify{
		fd:      fd,
		file:    os.NewFile(uintptr(fd), "inotify"),
		out:     make(chan []notice),
		errs:    make(chan error, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		dirs:    make(map[int32]watchedDir),
	}
	go n.read()
	return n, nil
}

// add watches dir. Adding a directory again (renamed, say) only updates
// its path: inotify has one watch per directory. The lock is held across
// the call, so that the reader cannot see the new watch's first events
// before its path.
func (n *inotify) add(dir string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	wd, err := unix.InotifyAddWatch(n.fd, dir, inotifyMask)
	if err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	var st unix.Stat_t
	_ = unix.Stat(dir, &st) // on failure (gone already), ino 0: moved drops it
	n.dirs[int32(wd)] = watchedDir{path: dir, ino: st.Ino}
	return nil
}

// moved stops watching a directory that was renamed (a notice with moved
// set), unless Watch added it again at its new place since (the same
// directory is then at the watch's path): a directory moved out of the
// tree must not go on reporting under its old path.
//
// The directories below it went with it: those not added again are
// dropped too.
func (n *inotify) moved(nt notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d, ok := n.dirs[nt.watch]
	if !ok || d.there() {
		return // added again where it is now
	}
	n.dropLocked(nt.watch)
	below := strings.TrimSuffix(d.path, string(filepath.Separator)) + string(filepath.Separator)
	for wd, sub := range n.dirs {
		if strings.HasPrefix(sub.path, below) && !sub.there() {
			n.dropLocked(wd)
		}
	}
}

func (n *inotify) prune() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for wd, d := range n.dirs {
		if !d.there() {
			n.dropLocked(wd)
		}
	}
}

// there reports whether the directory is at its path.
func (d watchedDir) there() bool {
	var st unix.Stat_t
	return unix.Stat(d.path, &st) == nil && st.Ino == d.ino
}

// dropLocked stops watching wd. n.mu must be held.
func (n *inotify) dropLocked(wd int32) {
	delete(n.dirs, wd)
	_, _ = unix.InotifyRmWatch(n.fd, uint32(wd)) // fails only if already gone
}

func (n *inotify) notices() <-chan []notice { return n.out }
func (n *inotify) errors() <-chan error     { return n.errs }
func (n *inotify) reportsCloses() bool      { return true }

func (n *inotify) close() error {
	close(n.done)
	err := n.file.Close() // ends a read in progress
	<-n.stopped
	return err
}

// read reads events and sends them as notices, those of one read
// together, until closed. If reading fails it reports the error and closes
// the notices' channel.
func (n *inotify) read() {
	defer close(n.stopped)
	buf := make([]byte, 64<<10) // holds many events; one needs at most 16 + NAME_MAX + 1 bytes
	for {
		size, err := n.file.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				n.report(fmt.Errorf("file watcher: %w", err))
				close(n.out)
			}
			return
		}
		var batch []notice
		for ev := buf[:size]; len(ev) >= unix.SizeofInotifyEvent; {
			wd := int32(binary.NativeEndian.Uint32(ev[0:]))
			mask := binary.NativeEndian.Uint32(ev[4:])
			nameLen := int(binary.NativeEndian.Uint32(ev[12:]))
			end := min(unix.SizeofInotifyEvent+nameLen, len(ev))
			name := ev[unix.SizeofInotifyEvent:end]
			ev = ev[end:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i] // the kernel pads names with NULs
			}
			if nt, ok := n.notice(wd, mask, string(name)); ok {
				batch = append(batch, nt)
			}
		}
		if len(batch) == 0 {
			continue
		}
		select {
		case n.out <- batch:
		case <-n.done:
			return
		}
	}
}

// notice translates one event; ok is false for events that name nothing
// to report.
func (n *inotify) notice(wd int32, mask uint32, name string) (notice, bool) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		n.report(errOverflow)
		return notice{}, false
	}
	n.mu.Lock()
	d, ok := n.dirs[wd]
	dir := d.path
	if mask&unix.IN_IGNORED != 0 { // the watch is gone (its directory removed)
		delete(n.dirs, wd)
		ok = false
	}
	n.mu.Unlock()
	if !ok {
		return notice{}, false
	}
	path := dir
	if name != "" {
		path = filepath.Join(dir, name)
	}
	op := opChanged
	switch {
	case mask&unix.IN_CLOSE_WRITE != 0:
		op = opClosed
	case mask&unix.IN_MODIFY != 0:
		op = opWritten
	case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
		op = opGone
	case mask&unix.IN_MOVED_TO != 0:
		op = opArrived
	case mask&unix.IN_CREATE != 0:
		op = opCreated
	}
	return notice{path: path, op: op, moved: mask&unix.IN_MOVE_SELF != 0, watch: wd}, true
}

// report sends err unless an error is already waiting: one is enough to
// make Watch walk the directory again.
func (n *inotify) report(err error) {
	select {
	case n.errs <- err:
	default:
	}
}
