package server_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// wrappingNode is a node whose client takes TTL wrappers in SotW (L3).
func wrappingNode(id string) *corev3.Node {
	return &corev3.Node{Id: id, ClientFeatures: []string{"xds.config.supports-resource-in-sotw", "xds.config.supports-resource-ttl"}}
}

// wrappers returns a SotW response's TTL wrappers by name.
func wrappers(t *testing.T, r *discovery.DiscoveryResponse) map[string]*discovery.Resource {
	t.Helper()
	out := make(map[string]*discovery.Resource)
	for _, a := range r.Resources {
		if a.TypeUrl != wrapperType {
			continue
		}
		var w discovery.Resource
		if err := a.UnmarshalTo(&w); err != nil {
			t.Fatalf("wrapper: %v", err)
		}
		out[w.Name] = &w
	}
	return out
}

// refresh checks that r is a SotW TTL refresh of name at version_info
// and version: the resource again, its body in a wrapper with the TTL.
func refresh(t *testing.T, r *discovery.DiscoveryResponse, versionInfo, name string, want *resource.Resource) {
	t.Helper()
	w := wrappers(t, r)[name]
	if r.VersionInfo != versionInfo || w == nil || w.Version != want.Version || w.Resource == nil ||
		w.GetTtl().AsDuration() != want.TTL {
		t.Fatalf("refresh at version_info %q with %s: %v; want version_info %q, %s at %s with its body and TTL %v",
			r.VersionInfo, name, w, versionInfo, name, want.Version, want.TTL)
	}
	if d := cmp.Diff(want.Body, w.Resource, protocmp.Transform()); d != "" {
		t.Fatalf("refresh of %s: body (-want +got):\n%s", name, d)
	}
}

// deltaUpdate opens an incremental stream subscribed to "a" at v1, ACKs
// it, publishes v2 and returns the stream and v2's response, unanswered
// (heartbeats of v1 that come first are ACKed).
func deltaUpdate(t *testing.T, v1, v2 *resource.Resource) (*rawxds.Env, *rawxds.Delta, *discovery.DeltaDiscoveryResponse) {
	t.Helper()
	e := start(t, v1)
	s := e.DeltaADS(t)
	s.Send(dsub(eds, "a"))
	r := s.Recv()
	publish(e, v2)
	s.Send(dack(r))
	return e, s, recvUpdate(t, s)
}

// recvUpdate receives responses until one carries a's body, ACKing the
// heartbeats before it.
func recvUpdate(t *testing.T, s *rawxds.Delta) *discovery.DeltaDiscoveryResponse {
	t.Helper()
	r := s.Recv()
	for ; resOf(t, r, "a").Resource == nil; r = s.Recv() {
		s.Send(dack(r))
	}
	return r
}

// A client that rejects an update keeps what it had, and takes a heartbeat
// only at the version it accepted: Envoy compares a delta heartbeat with
// the resource's accepted version. Heartbeats after a NACK must carry it,
// not the rejected version, or what the client holds expires while the
// server is up. (SotW: see TestSotWRefreshAfterNACK.)
func TestTTLAfterNACK(t *testing.T) {
	t.Run("L2_D10_delta_heartbeat_after_a_NACK_is_at_the_accepted_version", func(t *testing.T) {
		v1 := withTTL(rawxds.Endpoints("a", 1), 200*time.Millisecond)
		v2 := withTTL(rawxds.Endpoints("a", 2), 300*time.Millisecond)
		e, s, r := deltaUpdate(t, v1, v2)
		if resOf(t, r, "a").Version != v2.Version {
			t.Fatalf("update at %s, want %s", resOf(t, r, "a").Version, v2.Version)
		}
		s.Send(dnack(r, "rejected"))
		for range 2 {
			resp := s.Recv()
			hb := resOf(t, resp, "a")
			if hb.Resource != nil || hb.Version != v1.Version || hb.GetTtl().AsDuration() != 200*time.Millisecond {
				t.Fatalf("heartbeat after the NACK: version %s, ttl %v, body %v; want v1's version %s and ttl, no body",
					hb.Version, hb.GetTtl().AsDuration(), hb.Resource != nil, v1.Version)
			}
			s.Send(dack(resp))
		}
		// A later update, accepted, is what heartbeats carry from then on.
		v3 := withTTL(rawxds.Endpoints("a", 3), 200*time.Millisecond)
		publish(e, v3)
		s.Send(dack(recvUpdate(t, s)))
		if hb := resOf(t, s.Recv(), "a"); hb.Resource != nil || hb.Version != v3.Version {
			t.Fatalf("heartbeat after the accepted update: version %s (body %v), want %s", hb.Version, hb.Resource != nil, v3.Version)
		}
	})

	t.Run("L2_D10_no_heartbeat_for_what_the_client_rejected_and_never_had", func(t *testing.T) {
		e := start(t, withTTL(rawxds.Endpoints("a", 1), 100*time.Millisecond))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		s.Send(dnack(s.Recv(), "rejected"))
		s.ExpectNone() // three TTLs: a heartbeat would be due every 50 ms
	})

	t.Run("L2_D9_what_the_client_kept_goes_with_an_unsubscription", func(t *testing.T) {
		_, s, r := deltaUpdate(t, withTTL(rawxds.Endpoints("a", 1), 100*time.Millisecond),
			withTTL(rawxds.Endpoints("a", 2), 100*time.Millisecond))
		s.Send(dnack(r, "rejected")) // the client keeps v1
		s.Send(dunsub(eds, "a"))     // and drops it
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"a"}})
		s.Send(dnack(recvUpdate(t, s), "rejected again")) // the client holds nothing
		s.ExpectNone()
	})

	t.Run("L2_D10_a_NACK_is_followed_by_a_heartbeat_at_once", func(t *testing.T) {
		// The rejected response refreshed no TTL, and a heartbeat may have
		// waited for it: what the client kept is refreshed at once, not
		// half a TTL (here 30 minutes) later.
		v1 := withTTL(rawxds.Endpoints("a", 1), time.Hour)
		_, s, r := deltaUpdate(t, v1, withTTL(rawxds.Endpoints("a", 2), time.Hour))
		s.Send(dnack(r, "rejected"))
		if hb := resOf(t, s.Recv(), "a"); hb.Resource != nil || hb.Version != v1.Version {
			t.Fatalf("after the NACK: %v, want a heartbeat of %s", hb, v1.Version)
		}
	})

	t.Run("L2_D9_a_NACK_after_an_unsubscription_keeps_nothing", func(t *testing.T) {
		_, s, r := deltaUpdate(t, withTTL(rawxds.Endpoints("a", 1), 100*time.Millisecond),
			withTTL(rawxds.Endpoints("a", 2), 100*time.Millisecond))
		s.Send(dunsub(eds, "a"))     // the client drops a
		s.Send(dnack(r, "rejected")) // then rejects the update it had in flight
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"a"}})
		s.Send(dnack(recvUpdate(t, s), "rejected again")) // the client holds nothing
		s.ExpectNone()
	})

	// rc/vh (domain foo.com) is kept at v1 under one key after a NACK;
	// then the client subscribes it by another and accepts v2: it holds
	// rc/vh at v2 (VHDS resources are held by name), which a heartbeat
	// names once, whichever key it goes by.
	for _, keys := range [][2]string{{"rc/vh", "rc/foo.com"}, {"rc/foo.com", "rc/vh"}} {
		t.Run("S11_L2_a_virtual_host_kept_under_"+keys[0]+"_then_accepted_under_"+keys[1], func(t *testing.T) {
			v1 := resource.MustNew(vhost("vh", "1", "foo.com").Message, resource.WithTTL(200*time.Millisecond))
			v2 := resource.MustNew(vhost("vh", "2", "foo.com").Message, resource.WithTTL(200*time.Millisecond))
			e := start(t, v1)
			s := vhdsStream(t, e)
			s.Send(dsub(vhds, keys[0]))
			r := s.Recv()
			publish(e, v2)
			s.Send(dack(r))
			for r = s.Recv(); resOf(t, r, "rc/vh").Resource == nil; r = s.Recv() {
				s.Send(dack(r))
			}
			s.Send(dnack(r, "rejected"))
			s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: vhds, ResourceNamesSubscribe: []string{keys[1]}})
			for r = s.Recv(); resOf(t, r, "rc/vh").Resource == nil; r = s.Recv() {
				s.Send(dack(r)) // heartbeats of v1
			}
			s.Send(dack(r)) // v2 under the second key
			hb := s.Recv()
			if names := rawxds.DeltaNames(hb); len(names) != 1 || resOf(t, hb, "rc/vh").Version != v2.Version {
				t.Fatalf("heartbeat names %v at %s, want rc/vh once at v2's %s", names, resOf(t, hb, "rc/vh").Version, v2.Version)
			}
		})
	}
}

// In SotW, TTLs are refreshed by sending the resources again. After a
// NACK, the refresh sends what was last sent: an Envoy may have applied
// part of the rejected response (each cluster that was valid, each watch
// before the one that failed), so what it kept is not known, and sending
// the older resources could undo what it applied. It may reject the
// refresh too; its TTLs are refreshed all the same (its SotW mux reads
// them before the watches).
func TestSotWRefreshAfterNACK(t *testing.T) {
	t.Run("L1_D10_sotw_refresh_after_a_NACK_is_what_was_last_sent", func(t *testing.T) {
		ttl := resource.MustNew(rawxds.Cluster("t").Message, resource.WithTTL(200*time.Millisecond))
		e := start(t, ttl, clusterV("p", 1))
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: wrappingNode("w"), TypeUrl: cds})
		r1 := s.Recv()
		publish(e, ttl, clusterV("p", 2))
		s.Send(ack(r1))
		r := s.Recv()
		for ; r.VersionInfo == r1.VersionInfo; r = s.Recv() {
			s.Send(ack(r)) // a refresh before the update
		}
		s.Send(nack(r, r1.VersionInfo, "rejected"))
		for range 2 {
			hb := s.Recv()
			refresh(t, hb, r.VersionInfo, "t", ttl)
			var p *clusterv3.Cluster
			for _, a := range hb.Resources {
				var c clusterv3.Cluster
				if a.TypeUrl != wrapperType && a.UnmarshalTo(&c) == nil && c.Name == "p" {
					p = &c
				}
			}
			if len(hb.Resources) != 2 || p == nil || p.GetConnectTimeout().AsDuration() != 2*time.Second {
				t.Fatalf("refresh lists %d clusters, p as %v; want t and p at 2s, as last sent", len(hb.Resources), p)
			}
			s.Send(nack(hb, r1.VersionInfo, "rejected again"))
		}
	})

	// A TTL refresh brings a NACKed version again every TTL/2, and its
	// client NACKs it again: one warning in the log for the run, not one
	// per refresh (the soak probe's finding), and one again after an ACK.
	t.Run("C1_repeated_NACKs_of_a_refresh_warn_once", func(t *testing.T) {
		logs := &logRecorder{}
		ttl := resource.MustNew(rawxds.Cluster("t").Message, resource.WithTTL(100*time.Millisecond))
		c := cache.New(nil)
		c.SetSnapshot("", cache.MustSnapshot(ttl))
		e := rawxds.Start(t, c, server.Config{Logger: slog.New(logs.handler())})
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: wrappingNode("w"), TypeUrl: cds})
		r := s.Recv()
		s.Send(nack(r, "", "rejected"))
		for range 3 {
			r = s.Recv()
			s.Send(nack(r, "", "rejected"))
		}
		r = s.Recv()
		waitFor(t, func() bool { return logs.count("NACK") == 4 })
		if n := logs.countAt(slog.LevelWarn, "NACK"); n != 1 {
			t.Fatalf("%d NACK warnings for four NACKs of one version with one message, want 1", n)
		}
		s.Send(ack(r))
		r = s.Recv()
		s.Send(nack(r, r.VersionInfo, "rejected"))
		waitFor(t, func() bool { return logs.count("NACK") == 5 })
		if n := logs.countAt(slog.LevelWarn, "NACK"); n != 2 {
			t.Errorf("%d NACK warnings, want 2: a NACK after an ACK is news", n)
		}
	})

	t.Run("L1_a_resource_gone_is_refreshed_no_more", func(t *testing.T) {
		// SotW cannot say an endpoint set is gone: the client keeps it
		// until its TTL runs out, which refreshes must then not prevent.
		v1 := withTTL(rawxds.Endpoints("a", 1), 200*time.Millisecond)
		e := start(t, v1)
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: wrappingNode("w"), TypeUrl: eds, ResourceNames: []string{"a"}})
		r1 := s.Recv()
		s.Send(ack(r1, "a"))
		hb := s.Recv()
		refresh(t, hb, r1.VersionInfo, "a", v1)
		publish(e) // a is gone, while the refresh is unanswered
		s.Send(ack(hb, "a"))
		s.ExpectNone()
	})
}

// owedSetup leaves a delta ADS stream holding cluster c and its endpoints,
// both with a TTL of an hour, with the endpoints' heartbeat owed: a slot
// (every 100 ms while the cluster's TTL was 200 ms) found their update in
// flight, and the cluster's own update has since taken the slots to 30
// minutes apart. It returns the unanswered endpoints' update. The
// snapshot also has endpoints x1 to x3, not yet subscribed.
func owedSetup(t *testing.T) (*rawxds.Env, *owedStream, *discovery.DeltaDiscoveryResponse) {
	c1 := resource.MustNew(clusterV("c", 1).Message, resource.WithTTL(200*time.Millisecond))
	e := start(t, owedSnap(c1, 1)...)
	s := &owedStream{t: t, Delta: e.DeltaADS(t)}
	s.Send(dsub(cds))
	s.Send(dack(s.until(body(cds, c1))))
	s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"c"}})
	s.Send(dack(s.until(body(eds, owedE(1)))))

	publish(e, owedSnap(c1, 2)...)
	endpoints := s.until(body(eds, owedE(2))) // left unanswered
	// A clusters' heartbeat sent after the endpoints' update: a slot
	// found the endpoints' update in flight.
	s.Send(dack(s.until(beat(cds))))
	publish(e, owedSnap(owedC2, 2)...)
	s.Send(dack(s.until(body(cds, owedC2))))
	return e, s, endpoints
}

// owedC2 is owedSetup's cluster at an hour's TTL.
var owedC2 = resource.MustNew(clusterV("c", 2).Message, resource.WithTTL(time.Hour))

// owedE is owedSetup's endpoints of c, at an hour's TTL.
func owedE(port uint32) *resource.Resource { return withTTL(rawxds.Endpoints("c", port), time.Hour) }

// owedSnap is owedSetup's snapshot: the cluster, its endpoints at port,
// and endpoints x1 to x3.
func owedSnap(c *resource.Resource, port uint32) []*resource.Resource {
	rs := []*resource.Resource{c, owedE(port)}
	for i := uint32(1); i <= 3; i++ {
		rs = append(rs, withTTL(rawxds.Endpoints(fmt.Sprintf("x%d", i), i), time.Hour))
	}
	return rs
}

// owedStream is an incremental stream with a helper to skip responses.
type owedStream struct {
	t testing.TB
	*rawxds.Delta
}

// until ACKs every response but the first for which want holds, which it
// returns unanswered.
func (s *owedStream) until(want func(*discovery.DeltaDiscoveryResponse) bool) *discovery.DeltaDiscoveryResponse {
	s.t.Helper()
	for {
		r := s.Recv()
		if want(r) {
			return r
		}
		s.Send(dack(r))
	}
}

// body matches a response carrying typeURL's one resource at v's version.
func body(typeURL string, v *resource.Resource) func(*discovery.DeltaDiscoveryResponse) bool {
	return func(r *discovery.DeltaDiscoveryResponse) bool {
		return r.TypeUrl == typeURL && len(r.Resources) == 1 && r.Resources[0].Resource != nil && r.Resources[0].Version == v.Version
	}
}

// beat matches a heartbeat of typeURL.
func beat(typeURL string) func(*discovery.DeltaDiscoveryResponse) bool {
	return func(r *discovery.DeltaDiscoveryResponse) bool {
		return r.TypeUrl == typeURL && len(r.Resources) > 0 && r.Resources[0].Resource == nil
	}
}

// A heartbeat slot that finds a type's response in flight skips the type;
// its heartbeat goes as soon as the response is answered, not a whole
// interval later (by when, at half the TTL, what the client holds may
// have expired).
func TestHeartbeatOwed(t *testing.T) {
	t.Run("L2_a_heartbeat_skipped_for_a_response_in_flight_follows_its_answer", func(t *testing.T) {
		e, s, endpoints := owedSetup(t)
		s.Send(dack(endpoints))
		hb := s.until(beat(eds))
		if v := hb.Resources[0].Version; v != owedE(2).Version {
			t.Fatalf("endpoints' heartbeat at %s, want %s", v, owedE(2).Version)
		}
		// No more heartbeats: the owed one does not call for another.
		// (The endpoints may still be sent again after the cluster's
		// update, O2.) A change is the barrier.
		s.Send(dack(hb))
		publish(e, owedSnap(owedC2, 3)...)
		for r := s.Recv(); !body(eds, owedE(3))(r); r = s.Recv() {
			if beat(eds)(r) || beat(cds)(r) {
				t.Fatalf("another heartbeat: %v", r)
			}
			s.Send(dack(r))
		}
	})

	t.Run("L2_an_owed_heartbeat_lets_one_update_go_first_not_every_one", func(t *testing.T) {
		// Each answer also subscribes more endpoints, which the same turn
		// would send: a real update goes before the owed heartbeat once;
		// then the heartbeat goes.
		_, s, r := owedSetup(t)
		for i, name := range []string{"x1", "x2", "x3"} {
			s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r.Nonce, ResourceNamesSubscribe: []string{name}})
			if r = s.Recv(); beat(eds)(r) {
				if i == 0 {
					t.Fatalf("the heartbeat went before the first update")
				}
				return
			}
		}
		t.Fatalf("three updates went before the owed heartbeat, the last %v", r)
	})
}

// TestTTLSupersededReply: with a response superseded (a subscription that
// did not wait for its reply, D2), two responses are in flight; the reply
// to each tells what the client holds of what that response changed, and
// heartbeats carry it.
func TestTTLSupersededReply(t *testing.T) {
	const ttl = 300 * time.Millisecond
	// inFlight returns a stream with two responses in flight: rA, an
	// update of "a" from v1 to v2, then rB, which sends "b" to a
	// subscription that did not wait for rA's reply.
	inFlight := func(t *testing.T) (s *rawxds.Delta, v1, v2 *resource.Resource, rA, rB *discovery.DeltaDiscoveryResponse) {
		v1, v2 = withTTL(rawxds.Endpoints("a", 1), ttl), withTTL(rawxds.Endpoints("a", 2), ttl)
		b := withTTL(rawxds.Endpoints("b", 1), ttl)
		e := start(t, v1, b)
		s = e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		r := s.Recv()
		publish(e, v2, b)
		s.Send(dack(r))
		rA = recvUpdate(t, s)
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"b"}})
		rB = s.Recv()
		if resOf(t, rB, "b").Resource == nil {
			t.Fatalf("the answer to the subscription of b: %v", rB)
		}
		return s, v1, v2, rA, rB
	}
	// heartbeatsOfA receives responses, ACKing each, until n of them carry
	// "a", and checks each is a heartbeat at version want; "b" must not be
	// in any unless withB.
	heartbeatsOfA := func(t *testing.T, s *rawxds.Delta, want string, withB bool, n int) {
		t.Helper()
		for got := 0; got < n; {
			r := s.Recv()
			s.Send(dack(r))
			for _, x := range r.GetResources() {
				switch {
				case x.GetName() == "a":
					if x.GetResource() != nil || x.GetVersion() != want {
						t.Fatalf("a in %v: version %s, body %v; want a heartbeat at %s", rawxds.DeltaNames(r), x.GetVersion(), x.GetResource() != nil, want)
					}
					got++
				case x.GetName() == "b" && !withB:
					t.Fatalf("a heartbeat of b, which the client rejected and never had: %v", x)
				}
			}
		}
	}

	t.Run("L2_D10_superseded_response_rejected_newer_accepted", func(t *testing.T) {
		s, v1, _, rA, rB := inFlight(t)
		s.Send(dnack(rA, "rejected")) // the client keeps a at v1
		s.Send(dack(rB))              // and takes b
		heartbeatsOfA(t, s, v1.Version, true, 2)
	})

	t.Run("L2_D10_superseded_response_accepted_newer_rejected", func(t *testing.T) {
		s, _, v2, rA, rB := inFlight(t)
		s.Send(dack(rA))                // the client holds a at v2
		s.Send(dnack(rB, "rejected b")) // and never had b
		heartbeatsOfA(t, s, v2.Version, false, 2)
	})
}
