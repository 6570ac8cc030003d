package server

import (
	"slices"
	"sort"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// slot is one type's work during a push.
type slot struct {
	ts *typeState
	w  work
}

// needsFirst reports whether a SotW full-state type owes the client its
// first response even if it is empty (an empty Listener or Cluster response
// tells the client that nothing exists: S9).
func (st *stream) needsFirst(ts *typeState) bool {
	return !st.delta && ts.t.FullState && !ts.sent
}

// push sends what the snapshot and subscriptions call for, in ADS order
// (O1): upserts type by type (clusters, endpoints, secrets, extension
// configs, listeners, routes, scoped routes, virtual hosts, runtime), then
// removals (listeners first, clusters and endpoints last). A type with an
// un-ACKed response sends nothing more (at most one in flight per type) and
// holds back every later type that has work, so an update is never
// overtaken by one that depends on it. Listener and route updates also wait
// for the client to request the endpoints of new clusters, and removals for
// the routes of new listeners (warmGate).
func (st *stream) push() error {
	if st.snap == nil {
		return nil
	}
	var slots []slot
	upserts, removals := 0, 0
	for _, t := range st.order() {
		ts := st.types[t]
		if ts == nil || !ts.active {
			continue
		}
		st.resume(ts)
		w := ts.evaluate(st.snap, st.delta)
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
			continue
		}
		if blocked || s.ts.waiting || st.warm.holdsUpsert(st, s.ts.t) {
			blocked = true
			continue
		}
		// Removals ride along when nothing else is waiting to go first.
		merge := st.only != nil || len(s.w.removals) == 0 ||
			(upserts == 1 && removals == 1 && !st.warm.holdsRemovals(st))
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
			if s.ts.waiting {
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

// resume checks a SotW client's claimed version against the snapshot
// (S13): if it is exactly what the subscription covers, nothing is resent.
func (st *stream) resume(ts *typeState) {
	if ts.resume == "" {
		return
	}
	claimed := ts.resume
	ts.resume = ""
	w := ts.evaluate(st.snap, false)
	var xor uint64
	for _, it := range w.upserts {
		xor ^= it.res.Hash()
	}
	if resource.SetVersion(xor) != claimed || ts.nHeld > 0 {
		return
	}
	ts.settle(w, true)
	ts.sent = true
	ts.lastVersion = claimed
}

// send writes one response for ts carrying w's upserts and, if
// withRemovals, its removals, and records it.
func (st *stream) send(ts *typeState, w work, withRemovals bool) error {
	var removed []string
	items := w.upserts
	if st.delta && withRemovals {
		removed, items = deltaRemovals(st.snap, ts, w)
	}
	ts.settle(w, withRemovals)
	nonce := st.srv.nextNonce()
	ts.nonce, ts.waiting, ts.sent, ts.lastVersion = nonce, true, true, ts.version()
	st.status.sent(ts.t, ts.lastVersion, nonce)
	st.srv.metrics.responses.Add(1)
	if !st.publishedAt.IsZero() {
		st.srv.metrics.latency.observe(time.Since(st.publishedAt))
	}
	if st.delta {
		drs, srcs := deltaResources(ts.t, items, removed)
		resp := &discovery.DeltaDiscoveryResponse{
			SystemVersionInfo: ts.lastVersion,
			TypeUrl:           ts.t.URL,
			Nonce:             nonce,
			Resources:         drs,
			RemovedResources:  removed,
		}
		if st.sendWire == nil {
			return st.sendDeltaResp(resp)
		}
		parts := make([][]byte, len(drs))
		for i, dr := range drs {
			if srcs[i] != nil && len(dr.Aliases) == 0 {
				parts[i] = srcs[i].DeltaField() // shared by every stream
			} else {
				parts[i] = entry(dr)
			}
		}
		return st.sendWire(deltaWire(resp, parts))
	}
	// Each resource once (S11): keys are names, except that a resource
	// subscribed by several aliases is held under each. Order is free.
	var bodies []*anypb.Any
	var parts [][]byte // the same, pre-encoded, when sending on the wire path
	var seen map[string]bool
	if ts.t.URL == resource.VirtualHostType {
		seen = make(map[string]bool)
	}
	add := func(r *resource.Resource) {
		if seen != nil {
			if seen[r.Name] {
				return
			}
			seen[r.Name] = true
		}
		body := st.sotwBody(r)
		bodies = append(bodies, body)
		if st.sendWire != nil {
			if body == r.Body {
				parts = append(parts, r.SotWField()) // shared by every stream
			} else {
				parts = append(parts, entry(body))
			}
		}
	}
	n := len(w.upserts)
	if ts.t.FullState {
		n = ts.nHeld
	}
	bodies = make([]*anypb.Any, 0, n)
	if st.sendWire != nil {
		parts = make([][]byte, 0, n)
	}
	if ts.t.FullState {
		for _, r := range ts.held() {
			if r != nil {
				add(r)
			}
		}
	} else {
		for _, it := range w.upserts {
			add(it.res)
		}
	}
	resp := &discovery.DiscoveryResponse{
		VersionInfo: ts.lastVersion,
		Resources:   bodies,
		TypeUrl:     ts.t.URL,
		Nonce:       nonce,
	}
	if st.sendWire == nil {
		return st.sendSotw(resp)
	}
	return st.sendWire(sotwWire(resp, parts))
}

// deltaRemovals splits a delta response's removals: names whose resource
// is gone go in removed_resources, once each, unless the same response
// sends them; an alias that no longer resolves while its resource lives on
// is answered as a name that does not exist (D5, D7). It returns the
// removed names and the response's items.
func deltaRemovals(snap *cache.Snapshot, ts *typeState, w work) ([]string, []item) {
	items := w.upserts
	sent := make(map[string]bool, len(items))
	for _, it := range items {
		if it.res != nil {
			sent[it.res.Name] = true
		}
	}
	var removed []string
	for _, k := range w.removals {
		r, _ := ts.heldAt(k)
		name := r.Name
		switch {
		case k != name && snap.Get(ts.t, name) != nil:
			items = append(items, item{key: k})
		case !sent[name]:
			sent[name] = true
			removed = append(removed, name)
		}
	}
	sort.Strings(removed)
	return removed, items
}

func sortItems(items []item) {
	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
}

// sotwBody returns the Any to put in a SotW response: the resource itself,
// or, for a resource with a TTL and a client that accepts it, a Resource
// wrapper carrying the TTL (L3).
func (st *stream) sotwBody(r *resource.Resource) *anypb.Any {
	if r.TTL == 0 || !st.wrapTTL {
		return r.Body
	}
	a, err := anypb.New(&discovery.Resource{
		Name:     r.Name,
		Version:  r.Version,
		Resource: r.Body,
		Ttl:      durationpb.New(r.TTL),
	})
	if err != nil {
		return r.Body
	}
	return a
}

// deltaResources builds the resources of an incremental response (D1, D5,
// D7): one entry per resource name, listing every alias the client used. A
// name the response also removes gets no "does not exist" entry: the
// removal says it.
//
// It also returns, entry by entry, the resource each came from (nil for a
// "does not exist" entry), whose encoding can be reused.
func deltaResources(t *resource.Type, items []item, removed []string) ([]*discovery.Resource, []*resource.Resource) {
	out := make([]*discovery.Resource, 0, len(items))
	src := make([]*resource.Resource, 0, len(items))
	byName := make(map[string]*discovery.Resource, len(items))
	for _, it := range items {
		if it.res == nil {
			if slices.Contains(removed, it.key) {
				continue
			}
			dr := &discovery.Resource{Name: it.key}
			if t.URL == resource.VirtualHostType {
				dr.Aliases = []string{it.key}
			}
			out, src = append(out, dr), append(src, nil)
			continue
		}
		dr := byName[it.res.Name]
		if dr == nil {
			dr = &discovery.Resource{Name: it.res.Name, Version: it.res.Version, Resource: it.res.Body}
			if it.res.TTL > 0 {
				dr.Ttl = durationpb.New(it.res.TTL)
			}
			byName[it.res.Name] = dr
			out, src = append(out, dr), append(src, it.res)
		}
		if it.alias {
			dr.Aliases = append(dr.Aliases, it.key)
		}
	}
	return out, src
}
