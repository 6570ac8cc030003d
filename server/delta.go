package server

import (
	"slices"
	"sort"
	"strings"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// handleDeltaRequest applies one incremental request as received.
func (st *stream) handleDeltaRequest(r *xdswire.DeltaRequest) error {
	if err := st.startFrom(&r.Node); err != nil {
		return err
	}
	return st.handleDelta(&r.Msg)
}

// handleDelta applies one incremental request (D2, D3, D6, D9, D10).
func (st *stream) handleDelta(req *discovery.DeltaDiscoveryRequest) error {
	ts, err := st.requestState(req.GetNode(), req.GetTypeUrl())
	if ts == nil {
		return err
	}
	nonce := req.GetResponseNonce()
	if nonce != "" && nonce == ts.nonce {
		st.recordReply(ts, ts.lastVersion, req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
		if ts.nDropped > 0 && !ts.wildcard && !slices.Contains(req.GetResourceNamesSubscribe(), wildcardName) {
			// What it stopped naming while the response was in flight
			// the client did not take in without a wildcard (leaveScope);
			// with one given in this very request, which the client
			// sent once it had the response, it may have (subscribe
			// sends it again, or its removal).
			ts.own()
			ts.clearDropped()
			ts.compact()
		}
	} else if nonce != "" && nonce == ts.prevNonce {
		st.recordSupersededReply(ts, "", req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	}
	// A stale nonce still carries subscription changes (D2).
	first := !ts.active
	ts.active = true
	sub, unsub := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if !first || len(unsub) > 0 || len(req.GetInitialResourceVersions()) > 0 || !ts.adoptNames(st.snap, sub, fNamed) {
		ts.subscribe(sub, unsub, first)
	}
	// A subscription that is not the reply to the response in flight (a
	// stale nonce, or none) is answered without waiting for that reply
	// (D2, S7): Envoy ACKs the response it has just applied and
	// subscribes to what it brought in one request, while a newer
	// response may be on its way.
	if len(sub) > 0 && ts.waiting && nonce != ts.nonce {
		ts.superseded = true
	}
	if first && len(req.GetInitialResourceVersions()) > 0 {
		// What the client has of what it subscribes to (D6); it drops the
		// rest, which a later subscription must send again.
		var items []item
		for name, v := range req.GetInitialResourceVersions() {
			if e := ts.lookup(name); ts.wildcard || (e != nil && e.flags&fNamed != 0) {
				// The snapshot's own resource when the client holds its
				// version (a client back from another replica holds the
				// most), else a bodiless stand-in for that version.
				if r := st.snap.Get(ts.t, name); r != nil && r.Version == v {
					items = append(items, item{key: r.Name, res: r})
				} else {
					items = append(items, item{key: name, res: resource.Placeholder(ts.t, name, v)})
				}
			}
		}
		ts.holdItems(items)
		// Shown as what the client holds, until a response changes it:
		// a client back from another replica may be sent nothing.
		st.status.resumed(ts.t, ts.version())
	}
	return nil
}

// sendDeltaUpdate writes an incremental response with items and removed.
func (st *stream) sendDeltaUpdate(ts *typeState, items []item, removed []string, nonce string, cp *controlPlane) error {
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
