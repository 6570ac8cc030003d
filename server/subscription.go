package server

import (
	"slices"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// wildcardName is the explicit wildcard subscription (PROTOCOL S8, D3).
const wildcardName = "*"

// typeState is one stream's state for one resource type. It is owned by the
// stream's goroutine and needs no lock.
type typeState struct {
	t *resource.Type

	// Subscription.
	active    bool                // the client has requested this type
	everNamed bool                // a name (or "*") was sent: the legacy wildcard is over
	wildcard  bool                // subscribed to every resource of the type
	names     map[string]struct{} // explicit subscription keys (names or aliases), without "*"
	lastNames []string            // the latest SotW request's names, as sent
	// namesDigest identifies lastNames's encoding (see sotwRequest).
	namesDigest namesDigest

	// What the client holds by our account, by subscription key. A nil
	// resource means we told the client the key does not exist (D5).
	held map[string]*resource.Resource
	xor  uint64 // XOR of the hashes of held resources: the set version
	ttls int    // number of held resources with a TTL
	// dropped holds, for SotW Listener/Cluster, resources the client
	// unsubscribed from since its last full-state response: it may still
	// hold them, so they count as held if it subscribes to them again.
	dropped map[string]*resource.Resource

	// Outstanding response.
	nonce   string // latest nonce sent for this type, "" if none
	waiting bool   // that response is not yet ACKed or NACKed
	sent    bool   // at least one response was sent for this type
	// lastVersion is the version of the latest response (SotW version_info,
	// delta system_version_info).
	lastVersion string
	// resume is the version a SotW client says it holds on its first
	// request (S13); it is checked against the first snapshot.
	resume string

	// Keys to evaluate on the next push; reeval means all of them.
	dirty  map[string]struct{}
	reeval bool
	// resend holds newly subscribed keys that are sent even if the client
	// holds them at the current version (S10, D8).
	resend map[string]struct{}
}

// drop remembers that the client may still hold r under key although it
// no longer subscribes to it.
func (ts *typeState) drop(key string, r *resource.Resource) {
	if ts.dropped == nil {
		ts.dropped = make(map[string]*resource.Resource)
	}
	ts.dropped[key] = r
}

// markResend records that key is to be sent again.
func (ts *typeState) markResend(key string) {
	if ts.resend == nil {
		ts.resend = make(map[string]struct{})
	}
	ts.resend[key] = struct{}{}
}

func newTypeState(t *resource.Type) *typeState {
	return &typeState{t: t, names: map[string]struct{}{}, held: map[string]*resource.Resource{}, reeval: true}
}

// version is the set version of what the client holds.
func (ts *typeState) version() string { return resource.SetVersion(ts.xor) }

// hold records that the client now holds r (nil: told it does not exist)
// under key.
func (ts *typeState) hold(key string, r *resource.Resource) {
	ts.forget(key)
	if r != nil {
		ts.xor ^= r.Hash()
		if r.TTL > 0 {
			ts.ttls++
		}
	}
	ts.held[key] = r
}

// forget removes key from what the client holds.
func (ts *typeState) forget(key string) {
	if old, ok := ts.held[key]; ok {
		if old != nil {
			ts.xor ^= old.Hash()
			if old.TTL > 0 {
				ts.ttls--
			}
		}
		delete(ts.held, key)
	}
}

// setNames replaces the SotW subscription with names (PROTOCOL S7, S8).
// It returns whether the subscription changed.
func (ts *typeState) setNames(names []string) bool {
	if len(names) > 0 && len(names) == len(ts.lastNames) &&
		(&names[0] == &ts.lastNames[0] || slices.Equal(names, ts.lastNames)) {
		return false // the common case: an ACK repeating the subscription
	}
	ts.lastNames = slices.Clone(names)
	wildcard := false
	next := make(map[string]struct{}, len(names))
	for _, n := range names {
		if n == wildcardName {
			wildcard = true
			continue
		}
		next[n] = struct{}{}
	}
	if len(names) > 0 {
		ts.everNamed = true
	} else if !ts.everNamed && ts.t.Wildcard {
		wildcard = true // legacy wildcard: never named anything yet
	}
	changed := wildcard != ts.wildcard || len(next) != len(ts.names)
	for n := range next {
		if _, ok := ts.names[n]; !ok {
			changed = true
			// A newly subscribed key is sent even if held (S10), unless a
			// wildcard covered it before and still does.
			if !(wildcard && ts.wildcard) {
				ts.markResend(n)
			}
		}
	}
	ts.wildcard, ts.names = wildcard, next
	if changed {
		ts.reeval = true
	}
	return changed
}

// subscribe and unsubscribe change a delta subscription (PROTOCOL D3, D8,
// D9). first is true for the first request of the type on the stream.
func (ts *typeState) subscribe(sub, unsub []string, first bool) {
	if first && len(sub) == 0 && ts.t.Wildcard && !ts.everNamed {
		ts.wildcard = true // legacy wildcard
	}
	for _, n := range sub {
		ts.everNamed = true
		if n == wildcardName {
			ts.wildcard = true
		} else {
			ts.names[n] = struct{}{}
			if !first {
				ts.markResend(n) // the client may have dropped it: send it again (D8)
			}
		}
		ts.reeval = true
	}
	for _, n := range unsub {
		if n == wildcardName {
			ts.wildcard = false
		} else {
			delete(ts.names, n) // unknown names are ignored (D9)
		}
		ts.reeval = true
	}
}

// markDirty records keys that changed in the snapshot; past
// dirtyAllThreshold of them the whole type is re-evaluated instead.
func (ts *typeState) markDirty(keys []string) {
	if len(keys) == 0 || ts.reeval {
		return
	}
	if len(ts.dirty)+len(keys) > dirtyAllThreshold {
		ts.reeval, ts.dirty = true, nil
		return
	}
	if ts.dirty == nil {
		ts.dirty = make(map[string]struct{}, len(keys))
	}
	for _, k := range keys {
		ts.dirty[k] = struct{}{}
	}
}

// dirtyAllThreshold is the number of changed keys of one type beyond which
// a stream re-evaluates the whole type rather than key by key.
const dirtyAllThreshold = 512

// item is one entry of a response: a resource sent under a key, or a
// notice that the key does not exist (res nil, delta only).
type item struct {
	key   string
	res   *resource.Resource
	alias bool
}

// work is what a type has to send against a snapshot.
type work struct {
	upserts  []item
	removals []string // held keys whose resource is gone
}

// evaluate computes the type's work against snap. It also forgets keys the
// client no longer subscribes to, and, for SotW types that cannot express
// removal, resources that are gone. delta selects the incremental rules.
func (ts *typeState) evaluate(snap *cache.Snapshot, delta bool) work {
	var w work
	check := func(key string) {
		r, alias := snap.Resolve(ts.t, key)
		_, named := ts.names[key]
		inScope := named || (ts.wildcard && r != nil && !alias)
		held, has := ts.held[key]
		if d, ok := ts.dropped[key]; ok && !has {
			held, has = d, true
			if inScope { // subscribed again: it is held, as far as we know
				ts.hold(key, d)
				delete(ts.dropped, key)
			}
		}
		_, again := ts.resend[key]
		switch {
		case !inScope && !ts.wildcard:
			if held != nil && !delta && ts.t.FullState {
				ts.drop(key, held)
			}
			ts.forget(key)
			delete(ts.resend, key)
		case !inScope:
			// Covered only by the wildcard and gone from the snapshot.
			if has && held != nil && (delta || ts.t.FullState) {
				w.removals = append(w.removals, key)
			} else {
				ts.forget(key)
			}
		case r != nil:
			if again || !has || held == nil || held.Version != r.Version {
				w.upserts = append(w.upserts, item{key: key, res: r, alias: alias})
			}
		case has && held != nil:
			if delta || ts.t.FullState {
				w.removals = append(w.removals, key)
			} else {
				ts.forget(key) // SotW cannot say this; the client keeps its copy
			}
		case delta && (!has || again):
			w.upserts = append(w.upserts, item{key: key}) // does not exist (D5)
		}
	}
	if ts.reeval {
		seen := make(map[string]struct{}, len(ts.names)+len(ts.held))
		visit := func(k string) {
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				check(k)
			}
		}
		for k := range ts.names {
			visit(k)
		}
		for k := range ts.held {
			visit(k)
		}
		for k := range ts.resend {
			visit(k)
		}
		for k := range ts.dropped {
			visit(k)
		}
		if ts.wildcard {
			snap.Each(ts.t, func(r *resource.Resource) { visit(r.Name) })
		}
		return w
	}
	for k := range ts.dirty {
		check(k)
	}
	for k := range ts.resend {
		if _, done := ts.dirty[k]; !done {
			check(k)
		}
	}
	return w
}

// settle records that the work's upserts (and, if withRemovals, its
// removals) were sent, and keeps what is still to do dirty.
func (ts *typeState) settle(w work, withRemovals bool) {
	if len(ts.held) == 0 && len(w.upserts) > 8 {
		ts.held = make(map[string]*resource.Resource, len(w.upserts)) // the first big response
	}
	for _, it := range w.upserts {
		ts.hold(it.key, it.res)
	}
	ts.reeval = false
	ts.dirty = nil
	ts.resend = nil
	if ts.t.FullState {
		ts.dropped = nil // the response states the full state
	}
	if withRemovals {
		for _, k := range w.removals {
			if _, named := ts.names[k]; named {
				ts.hold(k, nil) // the client now knows it does not exist
			} else {
				ts.forget(k)
			}
		}
		return
	}
	if len(w.removals) > 0 {
		ts.dirty = make(map[string]struct{}, len(w.removals))
		for _, k := range w.removals {
			ts.dirty[k] = struct{}{}
		}
	}
}
