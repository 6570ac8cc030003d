package server

import (
	"github.com/xdsd/xdsd/resource"
)

// accepted keeps, for a type whose responses carry TTLs, what the client
// still holds after it rejects a response (PROTOCOL L2, D10). The key list
// records a rejected response as held, so that it is not sent again; but a
// client keeps what it had, and takes a heartbeat only at the version it
// accepted: Envoy compares a delta heartbeat with the resource's accepted
// version, and a SotW one with the type's accepted version_info. Without
// this, heartbeats after a NACK carry the rejected version, the client
// does not take them as heartbeats, and what it holds expires while the
// server is up. Guarded by the stream's lock, as its typeState.
type accepted struct {
	// version is the version_info of the client's latest reply: the
	// version it accepted last (SotW).
	version string
	// inflight is what the client held, before the response in flight,
	// under each key that response changes.
	inflight []heldBefore
	// kept is what the client holds under each key a rejected response
	// changed, until a later response that changes the key is accepted
	// (nil: nothing).
	kept map[string]*resource.Resource
}

// heldBefore is what the client held under key before a response.
type heldBefore struct {
	key string
	res *resource.Resource
}

// tracksAccepted reports whether the response about to carry w must be
// tracked: the client sees TTLs (ttlOf), and holds a resource with one, or
// gets one, or rejected a response before.
func (st *stream) tracksAccepted(ts *typeState, w work) bool {
	if !st.delta && !st.wrapTTL {
		return false
	}
	if ts.acc != nil || ts.ttls > 0 {
		return true
	}
	for _, it := range w.upserts {
		if it.res != nil && it.res.TTL > 0 {
			return true
		}
	}
	return false
}

// recordSending records what the client holds under each key that the
// response about to carry w (and its removals, if withRemovals) changes.
// It is called before the response is settled into the key list.
func (st *stream) recordSending(ts *typeState, w work, withRemovals bool) {
	if !st.tracksAccepted(ts, w) {
		return
	}
	if ts.acc == nil {
		ts.acc = &accepted{version: ts.lastVersion}
	}
	a := ts.acc
	a.inflight = a.inflight[:0]
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
func (ts *typeState) recordAccepted(version string, nack bool) {
	a := ts.acc
	if a == nil {
		return
	}
	a.version = version
	for _, h := range a.inflight {
		if nack {
			if _, ok := a.kept[h.key]; !ok {
				if a.kept == nil {
					a.kept = make(map[string]*resource.Resource)
				}
				a.kept[h.key] = h.res
			}
		} else {
			delete(a.kept, h.key)
		}
	}
	clear(a.inflight) // keeps no resource alive
	a.inflight = a.inflight[:0]
	if len(a.kept) == 0 && ts.ttls == 0 {
		ts.acc = nil // nothing to remember: the key list is the client's
	}
}

// pruneKept forgets what the client kept under keys it no longer
// subscribes to: it dropped them, and a later subscription starts afresh.
func (ts *typeState) pruneKept() {
	if ts.acc == nil || ts.wildcard {
		return
	}
	for k := range ts.acc.kept {
		if e := ts.lookup(k); e == nil || e.flags&fNamed == 0 {
			delete(ts.acc.kept, k)
		}
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
// resource, and the resource: the key list's, but for the keys of a
// rejected response what the client kept, as long as it still subscribes to
// them.
func (ts *typeState) eachClientHeld(f func(key string, r *resource.Resource)) {
	var kept map[string]*resource.Resource
	if ts.acc != nil {
		kept = ts.acc.kept
	}
	for k, r := range ts.held() {
		if kr, ok := kept[k]; ok {
			r = kr
		}
		if r != nil {
			f(k, r)
		}
	}
	for k, r := range kept {
		if r == nil {
			continue
		}
		e := ts.lookup(k)
		if e != nil && e.flags&fHas != 0 {
			continue // done above
		}
		if ts.wildcard || (e != nil && e.flags&fNamed != 0) {
			f(k, r)
		}
	}
}

// heartbeatVersion is the version_info of a SotW heartbeat: the version the
// client accepted last, which it compares a heartbeat with.
func (ts *typeState) heartbeatVersion() string {
	if ts.acc != nil {
		return ts.acc.version
	}
	return ts.lastVersion
}
