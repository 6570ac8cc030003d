package server

import (
	"time"

	"github.com/xdsd/xdsd/resource"
)

// warmGate keeps make-before-break on an ADS stream (PROTOCOL O1, O2) where
// it depends on what the client asks for next:
//   - after clusters are sent, listener and route updates wait until the
//     client has requested, and been sent, the endpoints of those clusters;
//   - after listeners are sent, removals wait until the client has been
//     sent the routes of those listeners.
//
// The gate waits also for a dependency type the client has not asked for
// yet: a client that asks for clusters and listeners at once (as one that
// reconnects does) asks for the endpoints only once it has the clusters.
// A client that never asks is waited for at most Config.WarmTimeout. After
// a NACK (the client rejected some of what it was sent, and will not ask
// for their dependencies) the gate waits only for the dependencies the
// client has asked for.
//
// The gate keeps the responses' items themselves (their slices are read
// only, often shared between streams), each cut to its first item whose
// dependencies the client lacks: a check resumes there, and nothing is
// copied per name. Guarded by the stream's lock; the timer wakes the
// stream.
type warmGate struct {
	pending  []pendingSent // one per response with unmet dependencies
	eds      bool          // some pending item waits for endpoints (set by refresh)
	timer    *time.Timer
	deadline time.Time // when the wait times out; zero when not waiting
}

// pendingSent is what the gate keeps of one response.
type pendingSent struct {
	items []item // the response's items from the first with unmet dependencies
	// nacked: a NACK of the type came after the response, which may have
	// been the one rejected: its items wait only for what the client
	// asked for. A response sent after the NACK is not loosened by it.
	nacked bool
}

// arm records the dependencies of the resources just sent.
func (g *warmGate) arm(st *stream, sent []item) {
	rest := g.unmetFrom(st, sent, false)
	if len(rest) == 0 {
		return
	}
	g.pending = append(g.pending, pendingSent{items: rest})
	if g.timer == nil {
		g.deadline = time.Now().Add(st.srv.cfg.WarmTimeout)
		g.timer = time.AfterFunc(st.srv.cfg.WarmTimeout, st.waker.wake)
	}
}

// waitsFor reports whether sending sent would make the gate wait: then
// removals must not ride along with it (make before break: a cluster
// replaced by another is removed after the new one's endpoints are sent).
func (g *warmGate) waitsFor(st *stream, sent []item) bool {
	return len(g.unmetFrom(st, sent, false)) > 0
}

// nack notes that the client rejected a response of type t: what it
// rejected, it will not ask the dependencies of. Which of the responses
// waiting it rejected is not known: each of type t waits only for what the
// client asked for from now on.
func (g *warmGate) nack(t *resource.Type) {
	for i := range g.pending {
		if g.pending[i].items[0].res.Type == t {
			g.pending[i].nacked = true
		}
	}
}

// unmetFrom returns items from the first whose dependencies the client does
// not hold at their current version (if nacked, of those it asked for);
// nil when it holds them all.
func (g *warmGate) unmetFrom(st *stream, items []item, nacked bool) []item {
	for i, it := range items {
		if !met(st, it.res, nacked) {
			return items[i:]
		}
	}
	return nil
}

// met reports whether the client holds the current version of each of r's
// dependencies that the snapshot has (if nacked, of each it asked for: a
// client that rejected r does not ask for its dependencies).
func met(st *stream, r *resource.Resource, nacked bool) bool {
	if r == nil || r.DependsOnType == nil {
		return true
	}
	dep := st.types.get(r.DependsOnType)
	for _, name := range r.DependsOn {
		cur := st.snap.Get(r.DependsOnType, name)
		if cur == nil {
			continue // nothing to wait for
		}
		if dep == nil || !dep.active {
			if nacked {
				continue
			}
			return false // not asked for yet
		}
		if held, _ := dep.heldAt(name); held != nil && held.Version == cur.Version {
			continue
		}
		if nacked && !dep.wildcard {
			if e := dep.lookup(name); e == nil || e.flags&fNamed == 0 {
				continue // not asked for: maybe of a resource rejected
			}
		}
		return false
	}
	return true
}

// refresh moves past the items whose dependencies are met, and reports
// whether any remain.
func (g *warmGate) refresh(st *stream) bool {
	g.eds = false
	kept := g.pending[:0]
	for _, p := range g.pending {
		if p.items = g.unmetFrom(st, p.items, p.nacked); len(p.items) > 0 {
			kept = append(kept, p)
			g.eds = g.eds || p.items[0].res.DependsOnType == edsType
		}
	}
	clear(g.pending[len(kept):]) // let the dropped slices go
	g.pending = kept
	if len(kept) == 0 {
		g.clear()
		return false
	}
	return true
}

// holdsUpsert reports whether upserts of type t must wait: listeners and
// everything after them wait for endpoints.
func (g *warmGate) holdsUpsert(st *stream, t *resource.Type) bool {
	if !g.refresh(st) || t.Order < ldsType.Order {
		return false
	}
	return g.eds
}

// holdsRemovals reports whether removals must wait.
func (g *warmGate) holdsRemovals(st *stream) bool { return g.refresh(st) }

// due reports whether the wait has timed out at now.
func (g *warmGate) due(now time.Time) bool {
	return !g.deadline.IsZero() && !now.Before(g.deadline)
}

// clear opens the gate and stops its timer.
func (g *warmGate) clear() {
	g.pending, g.eds = nil, false
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.deadline = time.Time{}
}

// rewarm marks for sending again the resources of type clusters.t.Rewarms
// (endpoints) the client holds of the resources in sent (clusters) that it
// has an earlier version of. An updated cluster warms again, and its
// warming ends only with its ClusterLoadAssignment (PROTOCOL O2; seed 003:
// "Clusters are warmed when adding/removing/updating clusters"). Envoy asks
// again with a list of endpoint names that has not changed (SotW) or does
// not ask at all (incremental): unanswered, the updated cluster would wait
// out initial_fetch_timeout. Call it before the clusters are sent, with
// the stream's lock held; it reports whether it marked any.
func (st *stream) rewarm(clusters *typeState, sent []item) bool {
	dep := clusters.t.Rewarms
	eds := st.types.get(dep)
	if eds == nil || !eds.active {
		return false
	}
	marked := false
	for _, it := range sent {
		if it.res == nil || it.res.DependsOnType != dep {
			continue
		}
		before, ok := clusters.heldAt(it.key)
		if !ok || before == nil {
			continue // a new cluster: the warm gate waits for its endpoints
		}
		if before.Version == it.res.Version {
			continue // sent again unchanged (a resend): Envoy keeps it as it is
		}
		for _, name := range it.res.DependsOn {
			if i := eds.index(name); i >= 0 && eds.keys[i].flags&fHas != 0 {
				eds.setResend(eds.mutable(i)) // changed or not: evaluate sends it
				marked = true
			}
		}
	}
	return marked
}
