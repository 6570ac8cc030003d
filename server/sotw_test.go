package server_test

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

const (
	cds = resource.ClusterType
	eds = resource.EndpointType
	lds = resource.ListenerType
	rds = resource.RouteType
)

func start(t *testing.T, rs ...*resource.Resource) *rawxds.Env {
	t.Helper()
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(rs...))
	return rawxds.Start(t, c, server.Config{})
}

func publish(e *rawxds.Env, rs ...*resource.Resource) {
	e.Cache.SetSnapshot("", cache.MustSnapshot(rs...))
}

func req(typeURL string, names ...string) *discovery.DiscoveryRequest {
	return &discovery.DiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: typeURL, ResourceNames: names}
}

func ack(resp *discovery.DiscoveryResponse, names ...string) *discovery.DiscoveryRequest {
	return &discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce, ResourceNames: names}
}

func nack(resp *discovery.DiscoveryResponse, accepted, msg string, names ...string) *discovery.DiscoveryRequest {
	return &discovery.DiscoveryRequest{TypeUrl: resp.TypeUrl, VersionInfo: accepted, ResponseNonce: resp.Nonce,
		ResourceNames: names, ErrorDetail: &status.Status{Code: 3, Message: msg}}
}

func wantNames(t *testing.T, resp *discovery.DiscoveryResponse, want ...string) {
	t.Helper()
	sameNames(t, resp.GetTypeUrl()+" response", rawxds.Names(resp), want)
}

// sameNames fails the test unless got and want hold the same names.
func sameNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s names = %v, want %v", what, got, want)
	}
}

func typeStatus(t *testing.T, e *rawxds.Env, typeURL string) server.TypeStatus {
	t.Helper()
	for _, s := range e.Server.Status() {
		for _, ts := range s.Types {
			if ts.TypeURL == typeURL {
				return ts
			}
		}
	}
	t.Fatalf("no status for %s", typeURL)
	return server.TypeStatus{}
}

func TestSotW(t *testing.T) {
	// twoGroups starts a server whose nodes "a" and "b" see one cluster
	// each, "ca" and "cb".
	twoGroups := func(t *testing.T) (*cache.Cache, *rawxds.Env) {
		c := cache.New(func(n *corev3.Node) string { return n.GetId() })
		c.SetSnapshot("a", cache.MustSnapshot(rawxds.Cluster("ca")))
		c.SetSnapshot("b", cache.MustSnapshot(rawxds.Cluster("cb")))
		return c, rawxds.Start(t, c, server.Config{})
	}
	t.Run("S1_node_from_first_request", func(t *testing.T) {
		c, e := twoGroups(t)
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("b"), TypeUrl: cds})
		r := s.Recv()
		wantNames(t, r, "cb")
		// The second request has no node: the stream still belongs to "b".
		s.Send(&discovery.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"cb"}})
		c.SetSnapshot("b", cache.MustSnapshot(rawxds.Cluster("cb"), rawxds.Endpoints("cb", 1)))
		wantNames(t, s.Recv(), "cb")
		if got := e.Server.Status()[0].Node.GetId(); got != "b" {
			t.Fatalf("status node = %q, want b", got)
		}
	})

	// The first request names a type this server does not serve: it is
	// ignored (T3), but its node still identifies the stream.
	t.Run("S1_node_from_first_request_of_unknown_type", func(t *testing.T) {
		_, e := twoGroups(t)
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("b"), TypeUrl: "type.googleapis.com/xdsd.Unknown"})
		s.Send(&discovery.DiscoveryRequest{TypeUrl: cds})
		wantNames(t, s.Recv(), "cb")
		d := e.DeltaADS(t)
		d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("b"), TypeUrl: "type.googleapis.com/xdsd.Unknown"})
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: cds, ResourceNamesSubscribe: []string{"*"}})
		wantDelta(t, d.Recv(), cds, []string{"cb"}, nil)
	})

	t.Run("S2_response_fields", func(t *testing.T) {
		e := start(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1))
		s := e.ADS(t)
		s.Send(req(cds))
		s.Send(req(eds, "c1"))
		r1, r2 := s.Recv(), s.Recv()
		for _, r := range []*discovery.DiscoveryResponse{r1, r2} {
			if r.VersionInfo == "" || r.Nonce == "" || r.TypeUrl == "" {
				t.Fatalf("response lacks version, nonce or type: %v", r)
			}
			for _, a := range r.Resources {
				if a.TypeUrl != r.TypeUrl {
					t.Fatalf("resource type %s in %s response", a.TypeUrl, r.TypeUrl)
				}
			}
		}
		if r1.Nonce == r2.Nonce {
			t.Fatalf("two responses share nonce %q", r1.Nonce)
		}
	})

	t.Run("S3_ack_is_recorded", func(t *testing.T) {
		e := start(t, rawxds.Cluster("c1"))
		s := e.ADS(t)
		s.Send(req(cds))
		r := s.Recv()
		s.Send(ack(r))
		waitFor(t, func() bool { return typeStatus(t, e, cds).AckedVersion == r.VersionInfo })
		if ts := typeStatus(t, e, cds); ts.SentVersion != r.VersionInfo || ts.SentNonce != r.Nonce {
			t.Fatalf("status %+v does not match response %v/%v", ts, r.VersionInfo, r.Nonce)
		}
	})

	t.Run("S4_nack_is_not_resent", func(t *testing.T) {
		e := start(t, rawxds.Cluster("c1"))
		s := e.ADS(t)
		s.Send(req(cds))
		r1 := s.Recv()
		s.Send(ack(r1))
		publish(e, rawxds.Cluster("c1"), rawxds.Cluster("bad"))
		r2 := s.Recv()
		wantNames(t, r2, "c1", "bad")
		s.Send(nack(r2, r1.VersionInfo, "cluster bad is bad"))
		waitFor(t, func() bool { return typeStatus(t, e, cds).NackMessage == "cluster bad is bad" })
		ts := typeStatus(t, e, cds)
		if ts.NackedVersion != r2.VersionInfo || ts.AckedVersion != r1.VersionInfo {
			t.Fatalf("status after NACK = %+v, want nacked %s acked %s", ts, r2.VersionInfo, r1.VersionInfo)
		}
		// The same rejected state must not come back...
		publish(e, rawxds.Cluster("bad"), rawxds.Cluster("c1"))
		s.ExpectNone()
		// ...but a newer version does.
		publish(e, rawxds.Cluster("c1"), rawxds.Cluster("fixed"))
		r3 := s.Recv()
		wantNames(t, r3, "c1", "fixed")
		s.Send(ack(r3))
		waitFor(t, func() bool { return typeStatus(t, e, cds).AckedVersion == r3.VersionInfo })
	})

	t.Run("S5_stale_nonce_gets_no_response", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.ADS(t)
		s.Send(req(eds, "a"))
		r1 := s.Recv()
		s.Send(ack(r1, "a"))
		publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 1))
		r2 := s.Recv()
		// A request acking the old nonce and asking for b is stale: ignored.
		s.Send(ack(r1, "a", "b"))
		s.ExpectNone()
		// Acking the latest nonce with the same names is honoured.
		s.Send(ack(r2, "a", "b"))
		wantNames(t, s.Recv(), "b")
	})

	t.Run("S5_S7_stale_request_names_apply", func(t *testing.T) {
		// A stale request drops b while a response with b is in flight:
		// the client ignores b there. When it names b again, in its
		// reply to that response, b is sent again though unchanged
		// (S10). Before, the stale request's names were ignored with
		// it, and b was never sent again.
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.ADS(t)
		s.Send(req(eds, "a", "b"))
		r1 := s.Recv()
		s.Send(ack(r1, "a", "b"))
		publish(e, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 2))
		r2 := s.Recv()
		wantNames(t, r2, "b")
		s.Send(ack(r1, "a")) // sent before r2 was read: stale
		s.ExpectNone()
		s.Send(ack(r2, "a", "b")) // b's cluster is back
		wantNames(t, s.Recv(), "b")
	})

	t.Run("S6_no_resend_at_current_version", func(t *testing.T) {
		e := start(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1))
		s := e.ADS(t)
		s.Send(req(eds, "c1"))
		r := s.Recv()
		s.Send(ack(r, "c1"))
		s.Send(&discovery.DiscoveryRequest{TypeUrl: eds, VersionInfo: r.VersionInfo, ResourceNames: []string{"c1"}})
		// Barrier: the next response must be the change, not a resend.
		publish(e, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 2))
		r2 := s.Recv()
		if r2.VersionInfo == r.VersionInfo {
			t.Fatalf("resent version %s", r.VersionInfo)
		}
	})

	t.Run("S7_newer_request_supersedes", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.ADS(t)
		s.Send(req(eds, "a"))
		r := s.Recv()
		s.Send(ack(r, "b"))
		r = s.Recv()
		wantNames(t, r, "b")
		s.Send(ack(r, "b"))
		// a is no longer subscribed: its change sends nothing; b's does.
		publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 1))
		publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 2))
		wantNames(t, s.Recv(), "b")
	})

	t.Run("S8_wildcard_transitions", func(t *testing.T) {
		e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"))
		s := e.ADS(t)
		s.Send(req(cds)) // never named: wildcard
		r := s.Recv()
		wantNames(t, r, "a", "b")
		s.Send(ack(r, "*", "a")) // wildcard plus a
		publish(e, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Cluster("c"))
		r = s.Recv()
		wantNames(t, r, "a", "b", "c")
		s.Send(ack(r, "a")) // a only: the wildcard ends
		publish(e, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Cluster("d"))
		s.ExpectNone()
		s.Send(ack(r)) // empty after naming: nothing at all, not wildcard
		s.ExpectNone()
		s.Send(ack(r, "b"))
		wantNames(t, s.Recv(), "b")
	})

	t.Run("S9_full_state_for_listeners_and_clusters", func(t *testing.T) {
		e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Listener("l1", 80), rawxds.Listener("l2", 81))
		s := e.ADS(t)
		s.Send(req(cds))
		r := s.Recv()
		s.Send(ack(r))
		s.Send(req(lds))
		rl := s.Recv()
		s.Send(ack(rl))
		publish(e, rawxds.Cluster("a"), rawxds.Cluster("b2"), rawxds.Listener("l1", 80), rawxds.Listener("l2", 81))
		r = s.Recv()
		wantNames(t, r, "a", "b2") // unchanged a is still there; b is deleted
		s.Send(ack(r))
		publish(e, rawxds.Cluster("a"), rawxds.Cluster("b2"), rawxds.Listener("l1", 80), rawxds.Listener("l2", 82))
		rl = s.Recv()
		wantNames(t, rl, "l1", "l2") // unchanged l1 is still there
		s.Send(ack(rl))
		publish(e)
		r = s.Recv()
		rl = s.Recv()
		if len(r.Resources)+len(rl.Resources) != 0 {
			t.Fatalf("deleting everything sent %v and %v", rawxds.Names(r), rawxds.Names(rl))
		}
	})

	// Scoped routes are full state too, beyond the list's S9: Envoy's SotW
	// SRDS drops every scope a response leaves out, and waits for the first
	// response, empty or not, before its listener warms.
	t.Run("S9_full_state_for_scoped_routes", func(t *testing.T) {
		scope := func(name, rc string) *resource.Resource {
			return resource.MustNew(&routev3.ScopedRouteConfiguration{Name: name, RouteConfigurationName: rc,
				Key: &routev3.ScopedRouteConfiguration_Key{Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{
					Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: name}}}}})
		}
		srds := resource.ScopedRouteType
		e := start(t)
		s := e.ADS(t)
		s.Send(req(srds))
		r := s.Recv()
		wantNames(t, r) // none: said at once
		s.Send(ack(r))
		publish(e, scope("s1", "r1"), scope("s2", "r2"))
		r = s.Recv()
		wantNames(t, r, "s1", "s2")
		s.Send(ack(r))
		publish(e, scope("s1", "r1b"), scope("s2", "r2"))
		r = s.Recv()
		wantNames(t, r, "s1", "s2") // unchanged s2 is still there
		s.Send(ack(r))
		publish(e, scope("s1", "r1b"))
		r = s.Recv()
		wantNames(t, r, "s1") // s2 is deleted
	})

	// A cluster the client stopped asking for by leaving the wildcard is
	// newly requested when the wildcard comes back, and sent again.
	t.Run("S10_wildcard_again_resends_what_it_dropped", func(t *testing.T) {
		e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"))
		s := e.ADS(t)
		s.Send(req(cds, "*", "a"))
		r := s.Recv()
		wantNames(t, r, "a", "b")
		s.Send(ack(r, "*", "a"))
		s.Send(ack(r, "a")) // the wildcard ends: b is no longer requested
		s.ExpectNone()
		s.Send(ack(r, "*", "a")) // b is requested again
		wantNames(t, s.Recv(), "a", "b")
	})

	t.Run("S10_subset_growth_and_late_arrival", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.ADS(t)
		s.Send(req(eds, "a", "b"))
		r := s.Recv()
		wantNames(t, r, "a", "b")
		s.Send(ack(r, "a"))
		s.Send(ack(r, "a", "b")) // b again: sent again though unchanged
		r = s.Recv()
		wantNames(t, r, "b")
		s.Send(ack(r, "a", "b", "c")) // c does not exist yet: remembered
		s.ExpectNone()
		publish(e, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1), rawxds.Endpoints("c", 1))
		wantNames(t, s.Recv(), "c")
	})

	t.Run("S11_no_resource_twice", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Cluster("a"))
		s := e.ADS(t)
		s.Send(req(eds, "a", "a", "a"))
		wantNames(t, s.Recv(), "a")
		s.Send(req(cds, "a", "*", "a"))
		wantNames(t, s.Recv(), "a")
	})

	t.Run("S12_versions_per_type", func(t *testing.T) {
		e := start(t, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
		s := e.ADS(t)
		s.Send(req(cds))
		rc := s.Recv()
		s.Send(ack(rc))
		s.Send(req(eds, "a"))
		re := s.Recv()
		s.Send(ack(re, "a"))
		publish(e, rawxds.Cluster("a"), rawxds.Endpoints("a", 2))
		re2 := s.Recv()
		if re2.TypeUrl != eds || re2.VersionInfo == re.VersionInfo {
			t.Fatalf("endpoint change gave %s version %s", re2.TypeUrl, re2.VersionInfo)
		}
		waitFor(t, func() bool { return typeStatus(t, e, cds).SentVersion == rc.VersionInfo })
	})

	t.Run("S13_reconnect_with_current_version_is_not_resent", func(t *testing.T) {
		e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Endpoints("a", 1))
		s := e.ADS(t)
		s.Send(req(cds))
		r := s.Recv()
		s.Close()
		s2 := e.ADS(t)
		first := req(cds)
		first.VersionInfo = r.VersionInfo
		s2.Send(first)
		// Barrier: the EDS request is answered first, so CDS was skipped.
		s2.Send(req(eds, "a"))
		if got := s2.Recv(); got.TypeUrl != eds {
			t.Fatalf("got %s response, want only eds", got.TypeUrl)
		}
		// Its status shows CDS at the version it holds, as sent (with no
		// nonce) and ACKed: SYNCED. Before, CDS was left out of it.
		resumed := func() bool {
			for _, ss := range e.Server.Status() {
				for _, ts := range ss.Types {
					if ts.TypeURL == cds && ts.SentNonce == "" && ts.SentVersion == r.VersionInfo && ts.AckedVersion == r.VersionInfo {
						return true
					}
				}
			}
			return false
		}
		if !resumed() {
			t.Fatalf("status %+v: no stream with cds resumed at %s", e.Server.Status(), r.VersionInfo)
		}
		// A stale version is answered.
		s3 := e.ADS(t)
		old := req(cds)
		old.VersionInfo = "0123"
		s3.Send(old)
		wantNames(t, s3.Recv(), "a", "b")
	})

	// A reconnect naming resources is answered even at the version the
	// client claims: the client shrank {a, b} to {a} (its version still
	// that of {a, b}) and may have dropped b.
	t.Run("S13_named_subscription_is_resent_on_reconnect", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.ADS(t)
		s.Send(req(eds, "a", "b"))
		r := s.Recv()
		s.Send(ack(r, "a"))
		s.ExpectNone()
		s.Close()
		s2 := e.ADS(t)
		first := req(eds, "a", "b")
		first.VersionInfo = r.VersionInfo
		s2.Send(first)
		s2.Send(&discovery.DiscoveryRequest{TypeUrl: cds}) // barrier: an empty CDS response
		if got := s2.Recv(); got.TypeUrl != eds {
			t.Fatalf("first response is %s: the EDS request for a, b was not answered", got.TypeUrl)
		}
		// Names besides the wildcard: answered too (only a subscription to
		// everything, and nothing else, is resumed).
		s3 := e.ADS(t)
		s3.Send(req(cds, "*"))
		rc := s3.Recv()
		s3.Close()
		s4 := e.ADS(t)
		named := req(cds, "*", "x")
		named.VersionInfo = rc.VersionInfo
		s4.Send(named)
		if got := s4.Recv(); got.TypeUrl != cds {
			t.Fatalf("first response is %s, want cds", got.TypeUrl)
		}
	})

	t.Run("S14_resource_hint_at_current_version", func(t *testing.T) {
		e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.ADS(t)
		s.Send(req(eds, "a"))
		r := s.Recv()
		s.Send(ack(r, "a"))
		s.Send(&discovery.DiscoveryRequest{TypeUrl: eds, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: []string{"a", "b"}})
		wantNames(t, s.Recv(), "b")
	})
}
