package server

import (
	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// accepted keeps, for an incremental stream's type whose responses carry
// TTLs, what the client still holds after it rejects a response (PROTOCOL
// L2, D10). The key list records a rejected response as held, so that it
// is not sent again; but an incremental client keeps what it had (Envoy
// updates no resource of a rejected response), and takes a heartbeat only
// at the version it accepted. Without this, heartbeats after a NACK carry
// the rejected version, the client does not take them as heartbeats, and
// what it holds expires while the server is up. (SotW needs none of this:
// its TTLs are refreshed with the resources themselves; see heartbeat.)
// Guarded by the stream's lock, as its typeState.
type accepted struct {
	// inflight is what the client held, before the response in flight,
	// under each key that response changes where a TTL is involved.
	inflight []heldBefore
	// superseded is inflight of the response in flight before it, which
	// a request superseded and whose reply may still come (see
	// typeState.superseded): each reply settles its own response's keys.
	superseded []heldBefore
	// kept is what the client holds under each key a rejected response
	// changed, until a later response that changes the key is accepted
	// (nil: nothing). Only keys in scope that the key list holds.
	kept map[string]*resource.Resource
}

// heldBefore is what the client held under key before a response, and
// the name of the resource the response sends under it ("" if none).
type heldBefore struct {
	key  string
	res  *resource.Resource
	sent string
}

// ttlKey is the memo key of whether a snapshot has resources of a type
// with a TTL; used by address, from ttlKeys (one per type order), so that
// making one an interface value allocates nothing. Not of size zero, for
// distinct addresses.
type ttlKey struct{ _ byte }

// ttlKeys holds a ttlKey per type order.
var ttlKeys [resource.NumTypes]ttlKey

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
// stream is incremental, and the client holds a resource with a TTL, or
// may get one, or rejected a response before.
func (st *stream) tracksAccepted(ts *typeState) bool {
	return st.delta && (ts.acc != nil || ts.ttls > 0 || hasTTLs(st.snap, ts.t))
}

// recordSending records what the client holds under each key that the
// response about to carry w (and its removals, if withRemovals) changes,
// where the old or the new resource has a TTL (for heartbeats only those
// matter). It is called before the response is settled into the key list.
func (st *stream) recordSending(ts *typeState, w work, withRemovals bool) {
	if !st.tracksAccepted(ts) {
		return
	}
	if ts.acc == nil {
		ts.acc = &accepted{}
	}
	ts.pruneKept()
	a := ts.acc
	if ts.waiting && ts.superseded {
		// The response in flight stays so, with its reply to come: its
		// keys are set apart (and those of one before it, whose reply
		// is no longer told apart, are forgotten: the key list's view).
		clear(a.superseded)
		a.superseded = append(a.superseded[:0], a.inflight...)
		clear(a.inflight)
		a.inflight = a.inflight[:0]
	}
	add := func(key string, r *resource.Resource) {
		before := ts.clientHeldAt(key)
		if (before == nil || before.TTL == 0) && (r == nil || r.TTL == 0) {
			return
		}
		h := heldBefore{key: key, res: before}
		if r != nil {
			h.sent = r.Name
		}
		a.inflight = append(a.inflight, h)
	}
	for _, it := range w.upserts {
		add(it.key, it.res)
	}
	if withRemovals {
		for _, k := range w.removals {
			add(k, nil)
		}
	}
}

// recordAccepted records the client's reply to the latest response in
// flight: on an ACK it holds what was sent, on a NACK what it held before.
// A superseded response whose reply did not come is taken as accepted.
func (st *stream) recordAccepted(ts *typeState, nack bool) {
	if ts.acc == nil {
		return
	}
	ts.settleReply(&ts.acc.inflight, nack)
	clear(ts.acc.superseded)
	ts.acc.superseded = ts.acc.superseded[:0]
	ts.dropAccepted()
}

// recordSupersededAccepted records the client's reply to the superseded
// response in flight (see accepted.superseded).
func (st *stream) recordSupersededAccepted(ts *typeState, nack bool) {
	if ts.acc == nil {
		return
	}
	ts.settleReply(&ts.acc.superseded, nack)
	ts.dropAccepted()
}

// settleReply records the reply to the response whose keys are *sent, and
// empties it.
func (ts *typeState) settleReply(sent *[]heldBefore, nack bool) {
	a := ts.acc
	if nack {
		for _, h := range *sent {
			if _, ok := a.kept[h.key]; !ok {
				if a.kept == nil {
					a.kept = make(map[string]*resource.Resource)
				}
				a.kept[h.key] = h.res
			}
		}
		ts.pruneKept()
		if len(*sent) > 0 && len(a.kept) > 0 {
			// Heartbeats may have waited for the rejected response,
			// which refreshed nothing: what the client kept is
			// refreshed now. (Only for a response that changed a TTL
			// resource: a rejected heartbeat does not call for another.)
			ts.beatDue = true
		}
	} else {
		aliases := ts.t.URL == resource.VirtualHostType
		for _, h := range *sent {
			delete(a.kept, h.key)
			delete(a.kept, h.sent)
			if aliases && h.sent != "" && len(a.kept) > 0 {
				// The client holds a virtual host by name: what it
				// kept of it under an alias is over too.
				for k, r := range a.kept {
					if r != nil && r.Name == h.sent {
						delete(a.kept, k)
					}
				}
			}
		}
	}
	clear(*sent) // keeps no resource alive
	*sent = (*sent)[:0]
}

// dropAccepted forgets the tracking once there is nothing to remember:
// the key list is then the client's.
func (ts *typeState) dropAccepted() {
	a := ts.acc
	if len(a.kept) == 0 && ts.ttls == 0 && len(a.inflight) == 0 && len(a.superseded) == 0 {
		ts.acc = nil
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
// "*"), which it subscribes to anew.
func (ts *typeState) keepNothing(keys []string) {
	if ts.acc == nil || len(keys) == 0 {
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
