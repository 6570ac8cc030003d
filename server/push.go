package server

import (
	"time"

	"github.com/xdsd/xdsd/resource"
)

// slot is one type's work during a push.
type slot struct {
	ts *typeState
	w  work
}

// needsFirst reports whether a type owes the client its first response
// even if it is empty: a SotW full-state type (an empty Listener or Cluster
// response tells the client that nothing exists: S9), and a delta wildcard
// (Envoy takes an empty response as the end of a wildcard's first fetch;
// without one it waits out initial_fetch_timeout, for ever if that is 0).
func (st *stream) needsFirst(ts *typeState) bool {
	if st.delta {
		return ts.wildcard && !ts.sent
	}
	return ts.t.FullState && !ts.sent
}

// push sends what the snapshot and subscriptions call for, in ADS order
// (O1): upserts type by type (clusters, endpoints, secrets, extension
// configs, listeners, routes, scoped routes, virtual hosts, runtime), then
// removals (listeners first, clusters and endpoints last). A type with an
// un-ACKed response sends nothing more (at most one in flight per type,
// unless a request asked for more since: paced) and holds back every
// later type that has work, so an update is never overtaken by one that
// depends on it. Listener and route updates also wait
// for the client to request the endpoints of new clusters, and removals for
// the routes of new listeners (warmGate).
func (st *stream) push() error {
	if st.snap == nil {
		return nil
	}
	st.held = false
	var buf [resource.NumTypes]slot // one per type: no allocation per push
	slots := buf[:0]
	upserts, removals := 0, 0
	for _, t := range st.order() {
		ts := st.types.get(t)
		if ts == nil || !ts.active {
			continue
		}
		st.resume(ts)
		w := ts.evaluate(st.snap)
		if len(w.upserts) > 0 || st.needsFirst(ts) {
			upserts++
		}
		if len(w.removals) > 0 {
			removals++
		}
		slots = append(slots, slot{ts, w})
	}
	blocked := false
	for i := range slots {
		s := &slots[i]
		if len(s.w.upserts) == 0 && !st.needsFirst(s.ts) {
			s.ts.superseded = false // nothing answers the request: back to the pace
			continue
		}
		if blocked || s.ts.paced() || st.warm.holdsUpsert(st, s.ts.t) {
			blocked, st.held = true, true
			continue
		}
		// Removals ride along when nothing else is waiting to go first.
		merge := st.only != nil || len(s.w.removals) == 0 ||
			(upserts == 1 && removals == 1 && !st.warm.holdsRemovals(st) && !st.warm.waitsFor(st, s.w.upserts))
		if s.ts.t.Rewarms != nil && st.only == nil && st.rewarm(s.ts, s.w.upserts) {
			// What to send again goes right after what depends on it.
			for j := i + 1; j < len(slots); j++ {
				if e := &slots[j]; e.ts.t == s.ts.t.Rewarms {
					had := len(e.w.upserts) > 0 || st.needsFirst(e.ts)
					if e.w = e.ts.evaluate(st.snap); !had && len(e.w.upserts) > 0 {
						upserts++
					}
				}
			}
		}
		if err := st.send(s.ts, s.w, merge); err != nil {
			return err
		}
		upserts--
		if merge && len(s.w.removals) > 0 {
			removals--
			s.w.removals = nil
		}
		if st.only == nil {
			st.warm.arm(st, s.w.upserts)
		}
	}
	if blocked || upserts > 0 || removals == 0 || st.warm.holdsRemovals(st) {
		return nil
	}
	for _, t := range resource.RemovalTypes() {
		for i := range slots {
			s := &slots[i]
			if s.ts.t != t || len(s.w.removals) == 0 {
				continue
			}
			if s.ts.paced() {
				st.held = true
				return nil // later removals wait for this one
			}
			if err := st.send(s.ts, work{removals: s.w.removals}, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// order returns the types this stream serves, in ADS upsert order.
func (st *stream) order() []*resource.Type {
	if st.only != nil {
		return []*resource.Type{st.only}
	}
	return adsOrder
}

var adsOrder = resource.Types()

// send writes one response for ts carrying w's upserts and, if
// withRemovals, its removals, and records it.
func (st *stream) send(ts *typeState, w work, withRemovals bool) error {
	var removed []string
	items := w.upserts
	if st.delta && withRemovals {
		removed, items = deltaRemovals(st.snap, ts, w)
	}
	st.recordSending(ts, w, withRemovals)
	ts.settle(w, withRemovals, st.snap)
	nonce := st.srv.nextNonce()
	ts.sent, ts.lastVersion = true, ts.version()
	st.await(ts, nonce)
	ts.beating = false
	ts.beatDeferred = ts.beatDue // a real update went first: the heartbeat goes next
	st.status.sent(ts.t, ts.lastVersion, nonce)
	st.srv.metrics.responses.Add(1)
	if !st.publishedAt.IsZero() {
		st.srv.metrics.latency.Observe(time.Since(st.publishedAt))
	}
	cp := st.srv.controlPlane.Load() // one for the message and its encoding
	if st.delta {
		return st.sendDeltaUpdate(ts, items, removed, nonce, cp)
	}
	return st.sendSotwUpdate(ts, w, nonce, cp)
}

// plain reports whether every item is a resource under its own name.
func plain(items []item) bool {
	for _, it := range items {
		if it.res == nil || it.alias {
			return false
		}
	}
	return true
}
