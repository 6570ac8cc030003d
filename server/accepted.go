package server

import (
	"time"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// accepted keeps, for a type whose responses carry TTLs, what the client
// still holds after it rejects a response (PROTOCOL L1, L2, D10). The key
// list records a rejected response as held, so that it is not sent again;
// but a client keeps what it had, and takes a heartbeat only at the version
// it accepted: Envoy compares a delta heartbeat with the resource's
// accepted version. Without this, heartbeats after a NACK carry the
// rejected version, the client does not take them as heartbeats, and what
// it holds expires while the server is up; SotW refreshes would send the
// rejected resources again. Guarded by the stream's lock, as its typeState.
type accepted struct {
	// version is the version_info of the client's latest reply: the
	// version it accepted last (SotW only).
	version string
	// inflight is what the client held, before the response in flight,
	// under each key that response changes; whole says that response
	// states the type's full state (SotW Listener, Cluster).
	inflight []heldBefore
	whole    bool
	// kept is what the client holds under each key a rejected response
	// changed, until a later response that changes the key is accepted
	// (nil: nothing). Only keys in scope, which the key list holds.
	kept map[string]*resource.Resource
}

// heldBefore is what the client held under key before a response.
type heldBefore struct {
	key string
	res *resource.Resource
}

// ttlKey is the memo key of whether a snapshot has resources of a type
// with a TTL; used by address, from ttlKeys (one per type order), so that
// making one an interface value allocates nothing. Not of size zero, for
// distinct addresses.
type ttlKey struct{ _ byte }

var ttlKeys [16]ttlKey

// hasTTLs reports whether snap has a resource of t with a TTL, worked out
// once per snapshot.
func hasTTLs(snap *cache.Snapshot, t *resource.Type) bool {
	return snap.Memo(&ttlKeys[t.Order], func() any {
		for _, r := range snap.Resources(t) {
			if r.TTL > 0 {
				return true
			}
		}
		return false
	}).(bool)
}

// tracksAccepted reports whether a response of ts is to be tracked: the
// client sees TTLs (ttlOf), and holds a resource with one, or may get one,
// or rejected a response before.
func (st *stream) tracksAccepted(ts *typeState) bool {
	if !st.delta && !st.wrapTTL {
		return false
	}
	return ts.acc != nil || ts.ttls > 0 || hasTTLs(st.snap, ts.t)
}

// recordSending records what the client holds under each key that the
// response about to carry w (and its removals, if withRemovals) changes.
// It is called before the response is settled into the key list.
func (st *stream) recordSending(ts *typeState, w work, withRemovals bool) {
	if !st.tracksAccepted(ts) {
		return
	}
	if ts.acc == nil {
		ts.acc = &accepted{version: ts.lastVersion}
	}
	a := ts.acc
	a.whole = !ts.delta && ts.t.FullState
	a.inflight = make([]heldBefore, 0, len(w.upserts)+len(w.removals))
	add := func(key string) {
		a.inflight = append(a.inflight, heldBefore{key, ts.clientHeldAt(key)})
	}
	for _, it := range w.upserts {
		add(it.key)
	}
	if withRemovals {
		for _, k := range w.removals {
			add(k)
		}
	}
}

// recordAccepted records the client's reply to the response in flight: on
// an ACK it holds what was sent, on a NACK what it held before. version is
// the version_info the reply carries.
func (st *stream) recordAccepted(ts *typeState, version string, nack bool) {
	a := ts.acc
	if a == nil {
		return
	}
	if !ts.delta {
		a.version = version
	}
	switch {
	case nack:
		for _, h := range a.inflight {
			if _, ok := a.kept[h.key]; !ok {
				if a.kept == nil {
					a.kept = make(map[string]*resource.Resource)
				}
				a.kept[h.key] = h.res
			}
		}
		ts.pruneKept()
		if len(a.kept) > 0 {
			// The rejected response refreshed no TTL, and heartbeats may
			// have waited for it: what the client kept is refreshed now.
			st.hb.next = time.Now()
		}
	case a.whole:
		a.kept = nil // the client holds the full state it was sent
	default:
		for _, h := range a.inflight {
			delete(a.kept, h.key)
		}
	}
	a.inflight = nil
	if len(a.kept) == 0 && ts.ttls == 0 {
		ts.acc = nil // nothing to remember: the key list is the client's
	}
}

// pruneKept forgets what the client kept under keys it no longer
// subscribes to (it dropped them, and a later subscription starts afresh)
// and under keys the key list no longer holds (the resource is gone: what
// the client kept is left to expire).
func (ts *typeState) pruneKept() {
	if ts.acc == nil {
		return
	}
	for k := range ts.acc.kept {
		e := ts.lookup(k)
		if e == nil || e.flags&(fHas|fDropped) == 0 || !(ts.wildcard || e.flags&fNamed != 0) {
			delete(ts.acc.kept, k)
		}
	}
}

// keepNothing records that the client holds nothing under keys (without
// "*"), which it subscribes to again: it may have dropped them (D8).
func (ts *typeState) keepNothing(keys []string) {
	if ts.acc == nil {
		return
	}
	if ts.acc.kept == nil {
		ts.acc.kept = make(map[string]*resource.Resource, len(keys))
	}
	for _, k := range keys {
		ts.acc.kept[k] = nil
	}
}

// clientHeldAt returns what the client holds under key, as far as we know
// (nil: nothing, or told it does not exist).
func (ts *typeState) clientHeldAt(key string) *resource.Resource {
	if ts.acc != nil {
		if r, ok := ts.acc.kept[key]; ok {
			return r
		}
	}
	if e := ts.lookup(key); e != nil && e.flags&(fHas|fDropped) != 0 {
		return e.res
	}
	return nil
}

// eachClientHeld calls f with each key under which the client holds a
// resource the key list holds, and the resource: the key list's, but for
// the keys of a rejected response what the client kept.
func (ts *typeState) eachClientHeld(f func(key string, r *resource.Resource)) {
	var kept map[string]*resource.Resource
	if ts.acc != nil {
		kept = ts.acc.kept
	}
	for k, r := range ts.held() {
		if r == nil {
			continue
		}
		if kr, ok := kept[k]; ok {
			r = kr
		}
		if r != nil {
			f(k, r)
		}
	}
}

// heartbeatVersion is the version_info of a SotW heartbeat: the version the
// client accepted last, which it compares a heartbeat with.
func (ts *typeState) heartbeatVersion() string {
	if ts.acc != nil && !ts.delta {
		return ts.acc.version
	}
	return ts.lastVersion
}
