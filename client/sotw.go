package client

import (
	"errors"
	"fmt"
	"slices"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// wrapperType is the type URL of the Resource wrapper a SotW response uses
// for resources with a TTL and for heartbeats (PROTOCOL L3).
const wrapperType = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// sendSotW sends a type's SotW request: its names, the last version
// accepted and the latest nonce; with nack, the error_detail of a NACK
// (C1).
func (s *stream) sendSotW(ts *typeState, nack error) {
	names := ts.names()
	if ts.sentNames == nil && len(names) == 0 {
		return // a first request with no names would mean a wildcard
	}
	version := ts.version
	if ts.sentNames == nil && len(ts.lost) > 0 {
		// Resuming (C5) without some resources of version: ask for all.
		version = ""
	}
	if nack == nil && len(ts.resub) > 0 {
		s.sendSotWResub(ts, names)
		version = ""
	}
	if len(names) == 0 && ts.sentNames != nil && s.legacyWildcard(ts) {
		// Giving up the legacy wildcard: an empty list would still be
		// it, until some request names something (PROTOCOL S8).
		ts.onlyWildcard = false
		s.sendSotWNames(ts, []string{"*"}, version, nil)
	}
	s.sendSotWNames(ts, names, version, nack)
}

// legacyWildcard says whether the type's requests on the stream have been
// the legacy wildcard, an empty list (Config.LegacyWildcard).
func (s *stream) legacyWildcard(ts *typeState) bool {
	return ts.onlyWildcard && s.c.cfg.LegacyWildcard && ts.info.wildcard
}

// sendSotWResub makes the server send again the names of ts.resub, which
// the client dropped while the server may believe it still holds them. A
// SotW server sends a resource again only when the names grow (PROTOCOL
// S10) or, polled over REST, when the version differs: a request without
// them goes first if the last one named them, and the caller's request
// that names them again carries no version.
func (s *stream) sendSotWResub(ts *typeState, names []string) {
	resub := ts.resub
	ts.resub = make(map[string]bool)
	if !slices.ContainsFunc(ts.sentNames, func(n string) bool { return resub[n] }) {
		return
	}
	without := make([]string, 0, len(names))
	for _, n := range names {
		if !resub[n] {
			without = append(without, n)
		}
	}
	s.sendSotWNames(ts, without, ts.version, nil)
}

// sendSotWNames sends one SotW request for names at version.
func (s *stream) sendSotWNames(ts *typeState, names []string, version string, nack error) {
	ts.onlyWildcard = ts.onlyWildcard && len(names) == 1 && names[0] == "*"
	wire := names
	if s.legacyWildcard(ts) {
		wire = nil // the legacy wildcard (PROTOCOL S8)
	}
	s.send(func(first bool) ([]byte, error) {
		req := &discovery.DiscoveryRequest{
			VersionInfo:   version,
			ResourceNames: wire,
			TypeUrl:       ts.info.url,
			ResponseNonce: ts.nonce,
		}
		if first {
			req.Node = s.c.node
		}
		if nack != nil {
			req.ErrorDetail = &statuspb.Status{Code: int32(code.Code_INVALID_ARGUMENT), Message: nack.Error()}
		}
		return proto.Marshal(req)
	})
	ts.sentNames = names
}

// handleSotW checks a SotW response whole, then ACKs and applies it, or
// NACKs it and keeps the last valid resources (C1, C2, C3).
func (s *stream) handleSotW(msg []byte) error {
	var resp discovery.DiscoveryResponse
	if err := proto.Unmarshal(msg, &resp); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	ts := s.types[resp.GetTypeUrl()]
	if ts == nil {
		return nil // a type never watched on this stream: ignored
	}
	ts.nonce = resp.GetNonce()
	items, errs := s.decodeSotW(ts, &resp)
	if len(errs) > 0 {
		s.reject(ts, resp.GetVersionInfo(), errs)
		s.sendSotW(ts, errors.Join(errs...))
		return nil
	}
	ts.version = resp.GetVersionInfo()
	s.sendSotW(ts, nil)
	present := make(map[string]bool, len(items))
	for _, a := range items {
		present[a.name] = true
		s.apply(ts, a)
	}
	if ts.info.fullState {
		// Full state: a resource held and not in the response is deleted
		// (C3). Names watched but never received are left to their expiry
		// timer: the response may answer an older request.
		var gone []string
		for name, rs := range ts.res {
			if rs.update != nil && !present[name] {
				gone = append(gone, name)
			}
		}
		s.remove(ts, gone, false)
	}
	s.startExpiry(ts)
	return nil
}

// decodeSotW decodes and validates every resource of a SotW response.
func (s *stream) decodeSotW(ts *typeState, resp *discovery.DiscoveryResponse) ([]accepted, []error) {
	var (
		items []accepted
		errs  []error
		seen  = make(map[string]bool)
	)
	for i, a := range resp.GetResources() {
		item := accepted{version: resp.GetVersionInfo()}
		body := a
		if a.GetTypeUrl() == wrapperType {
			var w discovery.Resource
			if err := a.UnmarshalTo(&w); err != nil {
				errs = append(errs, fmt.Errorf("resource %d: %w", i, err))
				continue
			}
			item.name, body = w.GetName(), w.GetResource()
			if w.GetTtl() != nil {
				item.ttl = w.GetTtl().AsDuration()
			}
		}
		if body != nil {
			m, raw, err := s.decode(ts, body)
			if err != nil {
				errs = append(errs, fmt.Errorf("resource %d: %w", i, err))
				continue
			}
			name := nameOf(m)
			if item.name != "" && item.name != name {
				errs = append(errs, fmt.Errorf("resource %d: wrapper names %q, resource names %q", i, item.name, name))
				continue
			}
			item.name, item.msg, item.raw = name, m, raw
		}
		if item.name == "" {
			errs = append(errs, fmt.Errorf("resource %d: no name", i))
			continue
		}
		if seen[item.name] {
			errs = append(errs, fmt.Errorf("%q is named twice in one response (C2)", item.name))
			continue
		}
		seen[item.name] = true
		if item.msg != nil {
			if err := s.validate(ts, item.name, item.msg); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		items = append(items, item)
	}
	return items, errs
}

// decode decodes one resource body of the type ts.
func (s *stream) decode(ts *typeState, body *anypb.Any) (proto.Message, []byte, error) {
	if body.GetTypeUrl() != ts.info.url {
		return nil, nil, fmt.Errorf("type %s in a response for %s", body.GetTypeUrl(), ts.info.url)
	}
	m := ts.info.msg.New().Interface()
	if err := proto.Unmarshal(body.GetValue(), m); err != nil {
		return nil, nil, fmt.Errorf("decode %s: %w", ts.info.url, err)
	}
	return m, body.GetValue(), nil
}

func (s *stream) validate(ts *typeState, name string, m proto.Message) error {
	if s.c.cfg.Validate == nil {
		return nil
	}
	if err := s.c.cfg.Validate(ts.info.url, name, m); err != nil {
		return fmt.Errorf("%q: %w", name, err)
	}
	return nil
}

// reject tells the watchers of a type that a response was rejected.
func (s *stream) reject(ts *typeState, version string, errs []error) {
	err := fmt.Errorf("client: %s version %q rejected: %w", ts.info.url, version, errors.Join(errs...))
	for _, w := range ts.allWatchers() {
		w.error(err)
	}
}
