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
// A client that never asks is waited for at most Config.WarmTimeout. Only
// dependencies of types the client already uses are waited for. Guarded by
// the stream's lock; the timer wakes the stream.
type warmGate struct {
	wait     map[*resource.Type]map[string]struct{} // dependency type → names to be sent
	timer    *time.Timer
	deadline time.Time // when the wait times out; zero when not waiting
}

// arm records the dependencies of the resources just sent.
func (g *warmGate) arm(st *stream, sent []item) {
	g.unmet(st, sent, func(t *resource.Type, name string) bool {
		if g.wait == nil {
			g.wait = make(map[*resource.Type]map[string]struct{})
		}
		if g.wait[t] == nil {
			g.wait[t] = make(map[string]struct{})
		}
		g.wait[t][name] = struct{}{}
		return true
	})
	if len(g.wait) > 0 && g.timer == nil {
		g.deadline = time.Now().Add(st.srv.cfg.WarmTimeout)
		g.timer = time.AfterFunc(st.srv.cfg.WarmTimeout, st.waker.wake)
	}
}

// waitsFor reports whether sending sent would make the gate wait: then
// removals must not ride along with it (make before break: a cluster
// replaced by another is removed after the new one's endpoints are sent).
func (g *warmGate) waitsFor(st *stream, sent []item) bool {
	waits := false
	g.unmet(st, sent, func(*resource.Type, string) bool {
		waits = true
		return false
	})
	return waits
}

// unmet calls f with each dependency of sent that the client does not hold
// at its current version, of a type the client uses, until f returns false.
func (g *warmGate) unmet(st *stream, sent []item, f func(t *resource.Type, name string) bool) {
	for _, it := range sent {
		r := it.res
		if r == nil || r.DependsOnType == nil {
			continue
		}
		dep := st.types.get(r.DependsOnType)
		if dep == nil || !dep.active {
			continue
		}
		for _, name := range r.DependsOn {
			if !g.satisfied(st, dep, name) && !f(dep.t, name) {
				return
			}
		}
	}
}

// satisfied reports whether the client holds the current version of name,
// or there is nothing to wait for.
func (g *warmGate) satisfied(st *stream, dep *typeState, name string) bool {
	cur := st.snap.Get(dep.t, name)
	if cur == nil {
		return true
	}
	held, _ := dep.heldAt(name)
	return held != nil && held.Version == cur.Version
}

// refresh drops the dependencies that are met, and reports whether any
// remain.
func (g *warmGate) refresh(st *stream) bool {
	for t, names := range g.wait {
		dep := st.types.get(t)
		for name := range names {
			if g.satisfied(st, dep, name) {
				delete(names, name)
			}
		}
		if len(names) == 0 {
			delete(g.wait, t)
		}
	}
	if len(g.wait) == 0 {
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
	_, waitEDS := g.wait[edsType]
	return waitEDS
}

// holdsRemovals reports whether removals must wait.
func (g *warmGate) holdsRemovals(st *stream) bool { return g.refresh(st) }

// due reports whether the wait has timed out at now.
func (g *warmGate) due(now time.Time) bool {
	return !g.deadline.IsZero() && !now.Before(g.deadline)
}

// clear opens the gate and stops its timer.
func (g *warmGate) clear() {
	g.wait = nil
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.deadline = time.Time{}
}

// rewarm marks for sending again the endpoints the client holds of the
// clusters in sent that it has an earlier version of. An updated cluster
// warms again, and its warming ends only with its ClusterLoadAssignment
// (PROTOCOL O2; seed 003: "Clusters are warmed when adding/removing/
// updating clusters"). Envoy asks again with a list of endpoint names that
// has not changed (SotW) or does not ask at all (incremental): unanswered,
// the updated cluster would wait out initial_fetch_timeout. Call it before
// the clusters are sent, with the stream's lock held; it reports whether
// it marked any.
func (st *stream) rewarm(clusters *typeState, sent []item) bool {
	eds := st.types.get(edsType)
	if eds == nil || !eds.active {
		return false
	}
	marked := false
	for _, it := range sent {
		if it.res == nil || it.res.DependsOnType != edsType {
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
