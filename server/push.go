package server

import (
	"slices"
	"sort"
	"strings"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
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

// resume checks a SotW client's claimed version against the snapshot
// (S13): if it is exactly what the subscription covers, nothing is resent.
func (st *stream) resume(ts *typeState) {
	if ts.resume == "" {
		return
	}
	claimed := ts.resume
	ts.resume = ""
	w := ts.evaluate(st.snap) // SotW only
	var xor uint64
	for _, it := range w.upserts {
		xor ^= it.res.Hash()
	}
	if resource.SetVersion(xor) != claimed || ts.nHeld > 0 {
		return
	}
	ts.settle(w, true, st.snap)
	ts.sent = true
	ts.lastVersion = claimed
	st.status.resumed(ts.t, claimed)
}

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
		return st.sendDelta(ts, items, removed, nonce, cp)
	}
	// A response with everything the stream holds, which many streams
	// hold, is written from shared bytes.
	c := ts.shared
	whole := c != nil && !(st.wrapTTL && c.ttls > 0) &&
		(ts.t.FullState || (len(w.upserts) == len(c.keys) && plain(w.upserts)))
	var rs []*resource.Resource
	if whole {
		rs = c.rs // the same resources, in the order of the bytes
	} else {
		rs = st.sotwResources(ts, w)
	}
	if st.sendParts != nil {
		sc := xdswire.GetParts(func(b []byte) []byte {
			return xdswire.AppendSotwHeader(b, ts.lastVersion, ts.t.URL, nonce, cp.field(false))
		})
		if whole {
			sc.Add(c.sotwEntries())
		} else {
			for _, r := range rs {
				sc.Add(st.sotwPart(r))
			}
		}
		return sc.Send(st.sendParts)
	}
	resp := &discovery.DiscoveryResponse{VersionInfo: ts.lastVersion, TypeUrl: ts.t.URL, Nonce: nonce, ControlPlane: cp.message()}
	bodies := func() {
		resp.Resources = make([]*anypb.Any, len(rs))
		for i, r := range rs {
			resp.Resources[i] = st.sotwBody(r)
		}
	}
	if st.sendWire == nil {
		bodies()
		return st.sendSotw(resp)
	}
	if whole {
		return st.sendWire(xdswire.SotwResponse(resp, cp.field(false), [][]byte{c.sotwEntries()}, bodies))
	}
	parts := make([][]byte, len(rs))
	for i, r := range rs {
		parts[i] = st.sotwPart(r)
	}
	return st.sendWire(xdswire.SotwResponse(resp, cp.field(false), parts, bodies))
}

// sotwPart returns r's entry in a SotW response's resources.
func (st *stream) sotwPart(r *resource.Resource) []byte {
	if body := st.sotwBody(r); body != r.Body {
		return xdswire.Entry(body) // a TTL wrapper
	}
	return r.SotWField() // shared by every stream
}

// sendDelta writes an incremental response with items and removed.
func (st *stream) sendDelta(ts *typeState, items []item, removed []string, nonce string, cp *controlPlane) error {
	// A response with everything the stream holds, which many streams
	// hold, is written from shared bytes; its entries, in their order, are
	// made only if a codec other than ours asks.
	c := ts.shared
	whole := c != nil && len(removed) == 0 && len(items) == len(c.keys) && plain(items)
	if st.sendParts != nil {
		sc := xdswire.GetParts(func(b []byte) []byte {
			return xdswire.AppendDeltaHeader(b, ts.lastVersion, ts.t.URL, nonce, removed, cp.field(true))
		})
		switch {
		case whole:
			sc.Add(c.deltaEntries())
		case ts.t.URL != resource.VirtualHostType && plain(items): // an entry per item, none particular
			for _, it := range items {
				sc.Add(it.res.DeltaField())
			}
		default:
			for _, e := range deltaEntries(ts.t, items, removed) {
				sc.Add(e.encoded(ts.t))
			}
		}
		return sc.Send(st.sendParts)
	}
	var entries []deltaEntry
	if !whole {
		entries = deltaEntries(ts.t, items, removed)
	}
	resp := &discovery.DeltaDiscoveryResponse{
		SystemVersionInfo: ts.lastVersion,
		TypeUrl:           ts.t.URL,
		Nonce:             nonce,
		RemovedResources:  removed,
		ControlPlane:      cp.message(),
	}
	resources := func() {
		if whole {
			entries = make([]deltaEntry, len(c.rs))
			for i, r := range c.rs {
				entries[i] = deltaEntry{res: r, name: r.Name}
			}
		}
		resp.Resources = make([]*discovery.Resource, len(entries))
		for i := range entries {
			resp.Resources[i] = entries[i].message(ts.t)
		}
	}
	if st.sendWire == nil {
		resources()
		return st.sendDeltaResp(resp)
	}
	if whole {
		return st.sendWire(xdswire.DeltaResponse(resp, cp.field(true), [][]byte{c.deltaEntries()}, resources))
	}
	parts := make([][]byte, len(entries))
	for i := range entries {
		parts[i] = entries[i].encoded(ts.t)
	}
	return st.sendWire(xdswire.DeltaResponse(resp, cp.field(true), parts, resources))
}

// sotwResources returns the resources of a SotW response for w: for a
// full-state type everything the client holds, otherwise w's upserts. Each
// resource is listed once (S11): keys are names, except that a resource
// subscribed by several aliases is held under each. Order is free.
func (st *stream) sotwResources(ts *typeState, w work) []*resource.Resource {
	var seen map[string]bool
	if ts.t.URL == resource.VirtualHostType {
		seen = make(map[string]bool)
	}
	n := len(w.upserts)
	if ts.t.FullState {
		n = ts.nHeld
	}
	rs := make([]*resource.Resource, 0, n)
	add := func(r *resource.Resource) {
		if seen != nil {
			if seen[r.Name] {
				return
			}
			seen[r.Name] = true
		}
		rs = append(rs, r)
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
	return rs
}

// deltaRemovals splits a delta response's removals: names whose resource
// is gone go in removed_resources, once each, unless the same response
// sends them; an alias that no longer resolves while its resource lives on
// is answered as a name that does not exist (D5, D7). It returns the
// removed names and the response's items.
func deltaRemovals(snap *cache.Snapshot, ts *typeState, w work) ([]string, []item) {
	items := w.upserts
	if len(w.removals) == 0 {
		return nil, items
	}
	sent := make(map[string]bool, len(items))
	for _, it := range items {
		if it.res != nil {
			sent[it.res.Name] = true
		}
	}
	var removed []string
	for _, k := range w.removals {
		name := ts.mayHoldAt(k).Name
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

func compareItems(a, b item) int { return strings.Compare(a.key, b.key) }

// sotwBody returns the Any to put in a SotW response: the resource itself,
// or, for a resource with a TTL and a client that accepts it, a Resource
// wrapper carrying the TTL (L3).
func (st *stream) sotwBody(r *resource.Resource) *anypb.Any {
	if r.TTL == 0 || !st.wrapTTL {
		return r.Body
	}
	return ttlWrapper(r)
}

// ttlWrapper returns r in a Resource wrapper that carries its TTL.
func ttlWrapper(r *resource.Resource) *anypb.Any {
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

// deltaEntry is one entry of an incremental response's resources (D1, D5,
// D7): a resource with every alias the client used for it, or a name that
// does not exist (res nil).
type deltaEntry struct {
	res     *resource.Resource
	name    string
	aliases []string
}

// deltaEntries groups a response's items into entries, one per resource
// name. A name the response also removes gets no "does not exist" entry:
// the removal says it.
func deltaEntries(t *resource.Type, items []item, removed []string) []deltaEntry {
	out := make([]deltaEntry, 0, len(items))
	var byName map[string]int // index in out; only aliases share a name
	if t.URL == resource.VirtualHostType {
		byName = make(map[string]int, len(items))
	}
	for _, it := range items {
		if it.res == nil {
			if !slices.Contains(removed, it.key) {
				out = append(out, deltaEntry{name: it.key})
			}
			continue
		}
		if byName != nil {
			if i, ok := byName[it.res.Name]; ok {
				if it.alias {
					out[i].aliases = append(out[i].aliases, it.key)
				}
				continue
			}
			byName[it.res.Name] = len(out)
		}
		e := deltaEntry{res: it.res, name: it.res.Name}
		if it.alias {
			e.aliases = []string{it.key}
		}
		out = append(out, e)
	}
	return out
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

// message returns the entry as a message.
func (e *deltaEntry) message(t *resource.Type) *discovery.Resource {
	if e.res == nil {
		dr := &discovery.Resource{Name: e.name}
		if t.URL == resource.VirtualHostType {
			dr.Aliases = []string{e.name}
		}
		return dr
	}
	dr := &discovery.Resource{Name: e.res.Name, Version: e.res.Version, Resource: e.res.Body, Aliases: e.aliases}
	if e.res.TTL > 0 {
		dr.Ttl = durationpb.New(e.res.TTL)
	}
	return dr
}

// encoded returns the entry's encoding in a response: the resource's own,
// shared by every stream, unless aliases make it particular.
func (e *deltaEntry) encoded(t *resource.Type) []byte {
	if e.res != nil && len(e.aliases) == 0 {
		return e.res.DeltaField()
	}
	return xdswire.Entry(e.message(t))
}
