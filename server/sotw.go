package server

import (
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// handleSotw applies one SotW request (S1 to S8, S13, S14).
func (st *stream) handleSotw(req *discovery.DiscoveryRequest) error {
	return st.handleSotwDigest(req, xdswire.DigestNames(req.GetResourceNames()))
}

// handleSotwDigest is handleSotw for a request whose names have digest d.
// If d is that of the names the type last applied, the request's names
// are not looked at (they may be left undecoded).
func (st *stream) handleSotwDigest(req *discovery.DiscoveryRequest, d xdswire.NamesDigest) error {
	ts, err := st.requestState(req.GetNode(), req.GetTypeUrl())
	if ts == nil {
		return err
	}
	nonce := req.GetResponseNonce()
	// A request with another nonce than the latest is stale (S5):
	// superseded by a response the client has not seen yet. Its version
	// says nothing of that response, and it gets no response of its own
	// (one is in flight, and the next waits for its reply), but its names
	// are the client's newest (S7): a name it drops there, it ignores in
	// the response in flight, and names again later only to be sent it
	// again (S10).
	if nonce != "" && nonce == ts.nonce {
		st.recordReply(ts, req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	} else if nonce != "" && nonce == ts.prevNonce {
		st.recordSupersededReply(ts, req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	}
	first := !ts.active
	ts.active = true
	if !ts.namesKnown || ts.namesDigest != d {
		grew := false
		if names := req.GetResourceNames(); !first || !ts.adoptNames(st.snap, names, fNamed|fResend) {
			grew = ts.setNames(names)
		}
		ts.namesDigest, ts.namesKnown = d, true
		// A spontaneous request (no nonce: never stale) that asks for
		// more than the response in flight is answered without waiting
		// for that response's reply (S7): the client sent it before it
		// saw that response, whose reply may never come.
		if grew && nonce == "" && ts.waiting {
			ts.superseded = true
		}
	}
	// Resume only a subscription to everything (S13): of one by name, the
	// version does not tell which of the names the client still holds.
	if first && req.GetVersionInfo() != "" && nonce == "" && ts.wildcard && len(ts.keys) == 0 {
		ts.resume = req.GetVersionInfo()
	}
	return nil
}

// handleSotwWire applies a request as the handler receives it, whatever
// the codec: kept encoded by the server's Codec, a name list whose
// encoding is the same as the type's previous one is not decoded; decoded
// by any other codec, it is handled as it is (handleSotw).
func (st *stream) handleSotwWire(r *xdswire.SotwRequest) error {
	r.Node.Known = st.node
	d, names, err := r.Decode()
	if err != nil {
		return errInvalidRequest(err)
	}
	if err := st.startFrom(&r.Node); err != nil {
		return err
	}
	if r.Raw == nil {
		return st.handleSotw(&r.Msg)
	}
	var ts *typeState
	if t := resource.Lookup(r.Msg.GetTypeUrl()); t != nil {
		ts = st.types.get(t)
	} else if st.only != nil && r.Msg.GetTypeUrl() == "" {
		ts = st.types.get(st.only)
	}
	if ts == nil || !ts.namesKnown || ts.namesDigest != d {
		if r.Msg.ResourceNames, err = names(); err != nil {
			return errInvalidRequest(err)
		}
	}
	return st.handleSotwDigest(&r.Msg, d)
}

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

// sendSotwUpdate writes a SotW response for ts carrying w.
func (st *stream) sendSotwUpdate(ts *typeState, w work, nonce string, cp *controlPlane) error {
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
