package cache

import (
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsd/xdsd/resource"
)

// dirtyAllThreshold is the number of changed keys of one type beyond which a
// watcher stops listing names and marks the whole type changed.
const dirtyAllThreshold = 512

// Watcher is one stream's view of its group: the latest snapshot and the
// keys that changed since the stream last looked. The cache writes to it
// without blocking; the stream reads it from its own goroutine.
type Watcher struct {
	cache *Cache       // read-only after Watch
	node  *corev3.Node // read-only after Watch
	group string       // guarded by cache.mu
	kick  chan struct{}

	mu    sync.Mutex // guards the fields below
	snap  *Snapshot
	at    time.Time // when snap was published
	dirty map[*resource.Type]*Dirty
}

// Dirty is the set of keys of one type that changed; All means "assume
// every key changed".
type Dirty struct {
	All  bool
	Keys map[string]struct{}
}

// Has reports whether key is marked.
func (d *Dirty) Has(key string) bool {
	if d == nil {
		return false
	}
	if d.All {
		return true
	}
	_, ok := d.Keys[key]
	return ok
}

// Group returns the name of the watcher's group.
func (w *Watcher) Group() string {
	w.cache.mu.Lock()
	defer w.cache.mu.Unlock()
	return w.group
}

// Kick is signalled (capacity one, coalescing) when a new snapshot arrives.
func (w *Watcher) Kick() <-chan struct{} { return w.kick }

// Take returns the latest snapshot, the changes since the last Take and
// when the snapshot was published, and resets the changes. The first Take
// after Watch reports nothing changed and a zero time: a new stream
// evaluates its subscriptions in full anyway.
func (w *Watcher) Take() (*Snapshot, map[*resource.Type]*Dirty, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, at := w.dirty, w.at
	w.dirty, w.at = nil, time.Time{}
	return w.snap, d, at
}

// Close unregisters the watcher.
func (w *Watcher) Close() { w.cache.unwatch(w) }

// notifyAll records a move to another group's snapshot: every type is to
// be re-evaluated. Called with the cache lock held.
func (w *Watcher) notifyAll(s *Snapshot) {
	w.mu.Lock()
	w.snap = s
	w.dirty = make(map[*resource.Type]*Dirty)
	for _, t := range resource.Types() {
		w.dirty[t] = &Dirty{All: true}
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// notify records a new snapshot and its changes; called with the cache lock
// held, it must not block.
func (w *Watcher) notify(s *Snapshot, ch Changes, at time.Time) {
	w.mu.Lock()
	w.snap = s
	if w.at.IsZero() {
		w.at = at // the oldest unseen publication: the latency to report
	}
	if w.dirty == nil {
		w.dirty = make(map[*resource.Type]*Dirty, len(ch))
	}
	for t, keys := range ch {
		d := w.dirty[t]
		if d == nil {
			d = &Dirty{}
			w.dirty[t] = d
		}
		if d.All {
			continue
		}
		if len(keys)+len(d.Keys) > dirtyAllThreshold {
			d.All, d.Keys = true, nil
			continue
		}
		if d.Keys == nil {
			d.Keys = make(map[string]struct{}, len(keys))
		}
		for _, k := range keys {
			d.Keys[k] = struct{}{}
		}
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}
