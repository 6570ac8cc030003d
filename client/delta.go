package client

import (
	"errors"
	"fmt"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// sendDeltaSubscription sends the change between the names watched and
// the names subscribed on the current stream. The first request of a type
// on a stream subscribes every name and lists the versions held (C5).
func (s *stream) sendDeltaSubscription(ts *typeState) {
	names := ts.names()
	first := ts.sentSet == nil
	if first && len(names) == 0 {
		return
	}
	req := &discovery.DeltaDiscoveryRequest{TypeUrl: ts.info.url}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
		if !ts.sentSet[n] || ts.resub[n] {
			req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, n)
		}
	}
	// Names to request again that only the wildcard covers: subscribing
	// to a name again makes the server send it again (PROTOCOL D8).
	for n := range ts.resub {
		if !want[n] && len(ts.wildcard) > 0 {
			req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, n)
		}
	}
	clear(ts.resub)
	for n := range ts.sentSet {
		if !want[n] {
			req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, n)
		}
	}
	if first {
		for n, rs := range ts.res {
			if rs.update != nil {
				if req.InitialResourceVersions == nil {
					req.InitialResourceVersions = make(map[string]string)
				}
				req.InitialResourceVersions[n] = rs.update.Version
			}
		}
	} else if len(req.ResourceNamesSubscribe)+len(req.ResourceNamesUnsubscribe) == 0 {
		return
	}
	s.sendDelta(req)
	ts.sentSet = want
}

func (s *stream) sendDelta(req *discovery.DeltaDiscoveryRequest) {
	s.send(func(first bool) ([]byte, error) {
		if first {
			req.Node = s.c.node
		}
		return proto.Marshal(req)
	})
}

// handleDelta checks an incremental response whole, then ACKs and applies
// it, or NACKs it and keeps the last valid resources (C1, C2).
func (s *stream) handleDelta(msg []byte) error {
	var resp discovery.DeltaDiscoveryResponse
	if err := proto.Unmarshal(msg, &resp); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	ts := s.types[resp.GetTypeUrl()]
	if ts == nil {
		return nil
	}
	items, errs := s.decodeDelta(ts, &resp)
	ack := &discovery.DeltaDiscoveryRequest{TypeUrl: ts.info.url, ResponseNonce: resp.GetNonce()}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		s.reject(ts, resp.GetSystemVersionInfo(), errs)
		ack.ErrorDetail = &statuspb.Status{Code: int32(code.Code_INVALID_ARGUMENT), Message: err.Error()}
		s.sendDelta(ack)
		return nil
	}
	s.sendDelta(ack)
	var missing []string
	for _, a := range items {
		rs := ts.res[a.name]
		if a.msg == nil && (rs == nil || rs.update == nil) {
			// A name-only resource for a name not held: the server says it
			// does not exist (PROTOCOL D5).
			missing = append(missing, a.name)
			continue
		}
		s.apply(ts, a)
	}
	s.remove(ts, resp.GetRemovedResources(), false)
	for _, n := range missing {
		s.notFound(ts, n)
	}
	return nil
}

// notFound tells the watchers of a watched name not held that it does not
// exist.
func (s *stream) notFound(ts *typeState, name string) {
	rs := ts.res[name]
	if rs == nil || len(rs.watchers) == 0 || rs.notExist {
		return
	}
	rs.stopExpiry()
	rs.notExist = true
	for w := range rs.watchers {
		w.doesNotExist(name)
	}
}

// decodeDelta decodes and validates every resource of a delta response.
func (s *stream) decodeDelta(ts *typeState, resp *discovery.DeltaDiscoveryResponse) ([]accepted, []error) {
	var (
		items []accepted
		errs  []error
		seen  = make(map[string]bool)
	)
	for _, n := range resp.GetRemovedResources() {
		if seen[n] {
			errs = append(errs, fmt.Errorf("%q is removed twice in one response (C2)", n))
		}
		seen[n] = true
	}
	for i, r := range resp.GetResources() {
		name := r.GetName()
		if name == "" {
			errs = append(errs, fmt.Errorf("resource %d: no name", i))
			continue
		}
		if seen[name] {
			errs = append(errs, fmt.Errorf("%q is named twice in one response (C2)", name))
			continue
		}
		seen[name] = true
		item := accepted{name: name, version: r.GetVersion()}
		if r.GetTtl() != nil {
			item.ttl = r.GetTtl().AsDuration()
		}
		if r.GetResource() != nil {
			m, raw, err := s.decode(ts, r.GetResource())
			if err != nil {
				errs = append(errs, fmt.Errorf("%q: %w", name, err))
				continue
			}
			if err := s.validate(ts, name, m); err != nil {
				errs = append(errs, err)
				continue
			}
			item.msg, item.raw = m, raw
		}
		items = append(items, item)
		// A resource subscribed by alias (VHDS) is also delivered under
		// each alias the client watches.
		for _, alias := range r.GetAliases() {
			if alias != name && !seen[alias] {
				seen[alias] = true
				a := item
				a.name = alias
				items = append(items, a)
			}
		}
	}
	return items, errs
}
