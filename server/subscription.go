package server

import (
	"slices"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// wildcardName is the explicit wildcard subscription (PROTOCOL S8, D3).
const wildcardName = "*"

// typeState is one stream's state for one resource type. It is guarded by
// the stream's lock.
type typeState struct {
	t     *resource.Type
	delta bool // the stream is incremental: no response states the full state

	// Subscription.
	active    bool // the client has requested this type
	everNamed bool // a name (or "*") was sent: the legacy wildcard is over
	wildcard  bool // subscribed to every resource of the type
	// namesDigest identifies the latest applied SotW name list (see
	// xdswire.SotwRequest); namesKnown says it is set.
	namesDigest xdswire.NamesDigest
	namesKnown  bool

	// The explicit subscription (fNamed) and what the client holds by our
	// account, by subscription key.
	keyList

	// Outstanding response.
	nonce   string // latest nonce sent for this type, "" if none
	waiting bool   // that response is not yet ACKed or NACKed
	// superseded says that a request since that response asks for more
	// than it carries: the next response need not wait for its reply,
	// which may never come (PROTOCOL S7, D2; see paced).
	superseded bool
	// nonceVersion is the version of the response of nonce; prevNonce and
	// prevVersion, those of the response superseded by it, whose reply
	// may still come ("" if none: see recordSupersededReply).
	nonceVersion, prevNonce, prevVersion string
	sent                                 bool // at least one response was sent for this type
	// beating says the outstanding response is a heartbeat; beatDue,
	// that the type's heartbeat is to go as soon as it has no response
	// in flight (see sendHeartbeats, recordAccepted); beatDeferred, that
	// a real update went first once (see sendDueBeats).
	beating, beatDue, beatDeferred bool
	// lastVersion is the version of the latest response (SotW version_info,
	// delta system_version_info).
	lastVersion string
	// resume is the version a SotW client says it holds on its first
	// request (S13); it is checked against the first snapshot.
	resume string
	// acc is what the client accepted, where it differs from the key
	// list; nil unless the stream is incremental and the type's responses
	// carry TTLs (see accepted).
	acc *accepted
	// nackLogged identifies the latest NACK logged at Warn: a hash of its
	// rejected version and message; 0 if none, or an ACK came since (see
	// recordReply).
	nackLogged uint64

	// Keys to evaluate on the next push, as the lists of changed keys the
	// cache shares between streams; reeval means all of them.
	dirty  [][]string
	reeval bool
}

func newTypeState(t *resource.Type, delta bool) *typeState {
	return &typeState{t: t, delta: delta, reeval: true}
}

// version is the set version of what the client holds.
func (ts *typeState) version() string { return resource.SetVersion(ts.xor) }

// subscriptionKeys returns names without "*", sorted and without duplicates, and
// whether "*" was among them.
func subscriptionKeys(names []string) ([]string, bool) {
	keys := make([]string, 0, len(names))
	wildcard := false
	for _, n := range names {
		if n == wildcardName {
			wildcard = true
		} else {
			keys = append(keys, n)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), wildcard
}

// setNames replaces the SotW subscription with names (PROTOCOL S7, S8).
// It returns whether the subscription grew: it names what it did not, or
// became a wildcard.
func (ts *typeState) setNames(names []string) (grew bool) {
	ts.own()
	keys, wildcard := subscriptionKeys(names)
	if len(names) > 0 {
		ts.everNamed = true
	} else if !ts.everNamed && ts.t.Wildcard {
		wildcard = true // legacy wildcard: never named anything yet
	}
	changed := wildcard != ts.wildcard
	j := 0
	for i := range ts.keys {
		e := &ts.keys[i]
		for j < len(keys) && keys[j] < e.key {
			j++
		}
		if e.flags&fNamed != 0 && (j == len(keys) || keys[j] != e.key) {
			ts.unname(e)
			changed = true
		}
	}
	// A newly subscribed key is sent even if held (S10), unless a wildcard
	// covered it before and still does; so is one the wildcard covers again
	// after it was dropped.
	resend := !(wildcard && ts.wildcard)
	grew = wildcard && !ts.wildcard
	if grew && ts.resendDropped() {
		changed = true
	}
	ts.mergeKeys(keys, func(_ int, e *keyEntry) {
		if e.flags&fNamed == 0 {
			e.flags |= fNamed
			changed, grew = true, true
			if resend {
				ts.setResend(e)
			}
		}
	})
	ts.wildcard = wildcard
	ts.compact()
	if changed || grew {
		ts.reeval = true
	}
	return grew
}

// paced reports whether the type's next response waits for the reply to
// the one in flight: one un-ACKed response per type is the pace, unless a
// request has asked for more since (superseded).
func (ts *typeState) paced() bool { return ts.waiting && !ts.superseded }

// adoptNames applies a first subscription that names exactly snap's
// resources of the type, in any order, each once, by sharing snap's list of
// those names (see keyList.adoptNamed); flags are what setNames or subscribe
// would give each new entry. It reports whether it did; if not, nothing
// changed, and the caller applies names its own way.
func (ts *typeState) adoptNames(snap *cache.Snapshot, names []string, flags uint8) bool {
	if ts.wildcard || ts.everNamed || !ts.adoptNamed(snap, ts.t, names, flags) {
		return false
	}
	ts.everNamed, ts.reeval = true, true
	return true
}

// subscribe and unsubscribe change a delta subscription (PROTOCOL D3, D8,
// D9). first is true for the first request of the type on the stream.
func (ts *typeState) subscribe(sub, unsub []string, first bool) {
	if first && len(sub) == 0 && ts.t.Wildcard && !ts.everNamed {
		ts.wildcard = true // legacy wildcard
	}
	if len(sub) == 0 && len(unsub) == 0 {
		return
	}
	ts.own()
	if len(sub) > 0 {
		ts.everNamed, ts.reeval = true, true
		keys, wildcard := subscriptionKeys(sub)
		if wildcard && !ts.wildcard {
			// What the client unsubscribed while a response was in flight
			// it may have dropped or kept: send it again.
			ts.resendDropped()
		}
		covered := ts.wildcard
		ts.wildcard = ts.wildcard || wildcard
		var fresh []string // out of scope until now: the client holds nothing
		ts.mergeKeys(keys, func(_ int, e *keyEntry) {
			if !first && !covered && e.flags&fNamed == 0 && ts.acc != nil {
				fresh = append(fresh, e.key)
			}
			e.flags |= fNamed
			if !first {
				ts.setResend(e) // the client may have dropped it: send it again (D8)
			}
		})
		ts.keepNothing(fresh)
	}
	for _, n := range unsub {
		ts.reeval = true
		if n == wildcardName {
			ts.wildcard = false
		} else if e := ts.lookup(n); e != nil {
			ts.unname(e) // unknown names are ignored (D9)
		}
	}
	if len(unsub) > 0 && !ts.wildcard {
		ts.leaveScope()
	}
	ts.compact()
	ts.pruneKept()
}

// leaveScope records that the client of a delta subscription without
// wildcard drops what it holds and no longer names. A response in flight
// may still carry some of it, which the client takes in if a wildcard
// covers it by then: that is kept as dropped (may be held) until the
// response is answered. Done as the request is handled, not at the next
// push, so that a wildcard given up and taken again before then (no
// snapshot yet) still finds the client without it.
func (ts *typeState) leaveScope() {
	for i := range ts.keys {
		e := &ts.keys[i]
		switch {
		case e.flags&fNamed != 0 || e.flags&fHas == 0:
		case ts.waiting && e.res != nil:
			ts.drop(e)
		default:
			ts.forget(e)
		}
	}
}

// holdItems records that the client holds each item's resource under its
// key.
func (ts *typeState) holdItems(items []item) {
	var missing []item
	for _, it := range items {
		if i := ts.index(it.key); i >= 0 {
			ts.hold(ts.mutable(i), it.res)
		} else {
			missing = append(missing, it)
		}
	}
	if len(missing) == 0 {
		return
	}
	// New keys: one pass builds the new list with them.
	if !slices.IsSortedFunc(missing, compareItems) {
		slices.SortFunc(missing, compareItems)
	}
	keys := make([]string, len(missing))
	for i, it := range missing {
		keys[i] = it.key
	}
	ts.mergeKeys(keys, func(i int, e *keyEntry) { ts.hold(e, missing[i].res) })
}

// markDirty records keys that changed in the snapshot; past
// dirtyAllThreshold of them the whole type is re-evaluated instead.
func (ts *typeState) markDirty(keys []string) {
	if len(keys) == 0 || ts.reeval {
		return
	}
	n := len(keys)
	for _, d := range ts.dirty {
		n += len(d)
	}
	if n > dirtyAllThreshold {
		ts.reeval, ts.dirty = true, nil
		return
	}
	ts.dirty = append(ts.dirty, keys)
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
	upserts  []item   // may be shared between streams (sharedWork, wholeWork): read only
	removals []string // held keys whose resource is gone
}

// evaluate computes the type's work against snap. It also forgets keys the
// client no longer subscribes to, and, for SotW types that cannot express
// removal, resources that are gone; the stream's variant (ts.delta) picks
// the rules.
func (ts *typeState) evaluate(snap *cache.Snapshot) work {
	if w, ok := ts.sharedWork(snap, ts.t, ts.wildcard, ts.reeval, ts.dirty); ok {
		return w
	}
	if w, ok := ts.wholeWork(snap, ts.t, ts.wildcard, ts.reeval); ok {
		return w
	}
	return ts.evaluateEach(snap)
}

// evaluateEach is evaluate key by key.
func (ts *typeState) evaluateEach(snap *cache.Snapshot) work {
	delta := ts.delta
	var w work
	upsert := func(it item) {
		if w.upserts == nil {
			// Sized for everything at once (a new stream's first
			// response), or for every changed key it may hold.
			n := len(ts.keys)
			if ts.wildcard {
				n += snap.Len(ts.t)
			}
			if !ts.reeval {
				changed := 0
				for _, keys := range ts.dirty {
					changed += len(keys)
				}
				n = min(n, changed)
			}
			w.upserts = make([]item, 0, n)
		}
		w.upserts = append(w.upserts, it)
	}
	// check evaluates key, whose entry is at index i (-1 if it has none).
	// It changes entries but never adds or removes one.
	check := func(key string, i int) {
		r, alias := snap.Resolve(ts.t, key)
		var flags uint8
		var held *resource.Resource
		if i >= 0 {
			flags, held = ts.keys[i].flags, ts.keys[i].res
		}
		inScope := flags&fNamed != 0 || (ts.wildcard && r != nil && !alias)
		has := flags&(fHas|fDropped) != 0
		if flags&fDropped != 0 && inScope {
			ts.hold(ts.mutable(i), held) // subscribed again: it is held, as far as we know
		}
		again := flags&fResend != 0
		switch {
		case !inScope && !ts.wildcard:
			if i >= 0 {
				e := ts.mutable(i)
				switch {
				case delta && ts.waiting:
					ts.forget(e) // what it may still hold stays dropped (leaveScope)
				case delta:
					ts.release(e)
				case flags&fHas != 0 && held != nil && ts.t.FullState:
					ts.drop(e) // a SotW client keeps it until the next full-state response
				default:
					ts.forget(e)
				}
				ts.clearResend(e)
			}
		case !inScope && has && held != nil && held.Name != key && snap.Get(ts.t, held.Name) != nil:
			// An alias no longer named, of a resource that lives on (the
			// wildcard covers names, not aliases): the client has the
			// resource under its name if the wildcard covers it, and
			// nothing is said of the alias. (Were the resource gone, the
			// case below would remove it by name.)
			e := ts.mutable(i)
			ts.release(e)
			ts.clearResend(e)
		case !inScope:
			// Covered only by the wildcard and gone from the snapshot.
			if has && held != nil && (delta || ts.t.FullState) {
				w.removals = append(w.removals, key)
			} else if flags&fHas != 0 {
				ts.forget(ts.mutable(i))
			}
		case r != nil:
			switch {
			case again || !has || held == nil || held.Version != r.Version:
				upsert(item{key: key, res: r, alias: alias})
			case held.Body == nil && flags&fHas != 0:
				// A version the client said it has (D6): the same
				// resource, whose TTL it now gets heartbeats for.
				ts.hold(ts.mutable(i), r)
			}
		case has && held != nil:
			if delta || ts.t.FullState {
				w.removals = append(w.removals, key)
			} else {
				ts.forget(ts.mutable(i)) // SotW cannot say this; the client keeps its copy
			}
		case delta && (!has || again):
			upsert(item{key: key}) // does not exist (D5)
		}
	}
	if ts.reeval {
		for i := 0; i < len(ts.keys); i++ { // check may own (copy) the list
			check(ts.keys[i].key, i)
		}
		if ts.wildcard {
			for _, r := range snap.Resources(ts.t) {
				if ts.index(r.Name) < 0 {
					check(r.Name, -1)
				}
			}
		}
		return w
	}
	var seen map[string]bool // keys already checked, when lists may overlap
	if len(ts.dirty) > 1 || ts.nResend > 0 {
		seen = make(map[string]bool)
	}
	for _, keys := range ts.dirty {
		for _, k := range keys {
			if seen != nil {
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			check(k, ts.index(k))
		}
	}
	for i := 0; ts.nResend > 0 && i < len(ts.keys); i++ {
		if e := &ts.keys[i]; e.flags&fResend != 0 && !seen[e.key] {
			check(e.key, i)
		}
	}
	return w
}

// settle records that the work's upserts (and, if withRemovals, its
// removals) were sent, and keeps what is still to do dirty. snap is the
// snapshot the work was computed against.
func (ts *typeState) settle(w work, withRemovals bool, snap *cache.Snapshot) {
	ts.reeval = false
	ts.dirty = nil
	if len(w.removals) == 0 && (ts.advance(snap, ts.t, w.upserts) || ts.adoptWhole(snap, ts.t, w.upserts)) {
		return
	}
	ts.settleEach(w, withRemovals, snap)
}

// settleEach is settle entry by entry, on a list of the stream's own.
func (ts *typeState) settleEach(w work, withRemovals bool, snap *cache.Snapshot) {
	ts.own()
	ts.holdItems(w.upserts)
	ts.clearAllResend()
	if ts.t.FullState && !ts.delta {
		ts.clearDropped() // the response states the full state
	}
	if withRemovals {
		for _, k := range w.removals {
			e := ts.lookup(k)
			switch {
			case e == nil:
			case e.flags&fNamed != 0:
				ts.hold(e, nil) // the client now knows it does not exist
			default:
				ts.release(e)
			}
		}
	} else if len(w.removals) > 0 {
		ts.dirty = [][]string{w.removals}
	}
	ts.compact()
	ts.share(snap, ts.t)
}

// typeStates holds a stream's typeState for each type it has used, by the
// type's Order, and in the order they were made: every ACK walks them,
// and a slice is far cheaper to walk than a map.
type typeStates struct {
	byOrder [resource.NumTypes]*typeState
	list    []*typeState
}

// get returns t's state, or nil.
func (s *typeStates) get(t *resource.Type) *typeState { return s.byOrder[t.Order] }

// add records ts, the state of a type that has none yet.
func (s *typeStates) add(ts *typeState) {
	s.byOrder[ts.t.Order] = ts
	s.list = append(s.list, ts)
}
