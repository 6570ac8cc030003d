package cache

import (
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// maxPending is the number of publications a watcher lists before it
// stops listing them and reports "everything may have changed" (a stream
// that is slow to look, say one blocked sending to a slow client).
const maxPending = 16

// Watcher is one stream's view of its group: the latest snapshot and what
// changed since the stream last looked. The cache writes to it without
// blocking; the stream reads it (Take) under its own lock.
type Watcher struct {
	cache *Cache // read-only after Watch
	// node is the node, guarded by cache.mu; for a watcher of an encoded
	// node (raw, read-only), nil while no grouping needs it decoded (see
	// WatchEncoded).
	node  *corev3.Node
	raw   []byte
	group string        // guarded by cache.mu
	kick  chan struct{} // nil when onChange is set
	// onChange, when set, is called instead of signalling kick.
	onChange func()

	// news is set when there is something to Take (written under mu, read
	// without it).
	news atomic.Bool

	mu      sync.Mutex // guards the fields below
	snap    *Snapshot
	at      time.Time // when the oldest untaken publication was made
	pending Pending
}

// Pending is what changed since a watcher was last looked at: the change
// sets of the publications since then, shared with every other watcher of
// the group (read-only), or All when every key of every type is to be
// re-evaluated.
type Pending struct {
	// All says that every key of every type is to be re-evaluated.
	All bool
	// Changes are the change sets of the publications since the watcher
	// was last looked at, oldest first. They are shared: read them only.
	Changes []Changes
}

// Kick is signalled (capacity one, coalescing) when a new snapshot arrives.
func (w *Watcher) Kick() <-chan struct{} { return w.kick }

// Take returns the latest snapshot, what changed since the last Take and
// when the oldest publication not yet taken was made, and resets them. The
// first Take after Watch reports nothing changed and a zero time: a new
// stream evaluates its subscriptions in full anyway.
func (w *Watcher) Take() (*Snapshot, Pending, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.news.Store(false)
	p, at := w.pending, w.at
	w.pending, w.at = Pending{}, time.Time{}
	return w.snap, p, at
}

// HasNews reports whether a snapshot or a change arrived since the last
// Take (or whether Take has never been called on a group with a snapshot):
// a cheap test before Take.
func (w *Watcher) HasNews() bool { return w.news.Load() }

// Close unregisters the watcher.
func (w *Watcher) Close() { w.cache.unwatch(w) }

// notifyAllLocked records a move to another group's snapshot: every type is to
// be re-evaluated. Called with the cache lock held.
func (w *Watcher) notifyAllLocked(s *Snapshot) {
	w.mu.Lock()
	w.snap = s
	w.pending = Pending{All: true}
	w.news.Store(true)
	w.mu.Unlock()
	w.wake()
}

// notifyLocked records a new snapshot and its changes, which it shares rather
// than copies: the cost per watcher of a publication is one append. Called
// with the cache lock held, it must not block.
func (w *Watcher) notifyLocked(s *Snapshot, ch Changes, at time.Time) {
	w.mu.Lock()
	w.snap = s
	if w.at.IsZero() {
		w.at = at // the oldest unseen publication: the latency to report
	}
	switch {
	case w.pending.All:
	case len(w.pending.Changes) >= maxPending:
		w.pending = Pending{All: true}
	default:
		w.pending.Changes = append(w.pending.Changes, ch)
	}
	w.news.Store(true)
	w.mu.Unlock()
	w.wake()
}

func (w *Watcher) wake() {
	if w.onChange != nil {
		w.onChange()
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}
