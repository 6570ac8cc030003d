package server_test

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
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

// heartbeat reports whether a SotW response's wrappers are all heartbeats
// (no body).
func heartbeat(t *testing.T, r *discovery.DiscoveryResponse) bool {
	t.Helper()
	ws := wrappers(t, r)
	for _, w := range ws {
		if w.Resource != nil {
			return false
		}
	}
	return len(ws) > 0
}

// A client that rejects an update keeps what it had, and takes a heartbeat
// only at the version it accepted: Envoy compares a delta heartbeat with
// the resource's accepted version, and a SotW one with the type's accepted
// version_info. Heartbeats after a NACK must carry those, not the rejected
// version, or what the client holds expires while the server is up.
func TestTTLAfterNACK(t *testing.T) {
	t.Run("L2_D10_delta_heartbeat_after_a_NACK_is_at_the_accepted_version", func(t *testing.T) {
		v1 := withTTL(rawxds.Endpoints("a", 1), 200*time.Millisecond)
		v2 := withTTL(rawxds.Endpoints("a", 2), 300*time.Millisecond)
		e := start(t, v1)
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		r := s.Recv()
		publish(e, v2)
		s.Send(dack(r))
		for r = s.Recv(); resOf(t, r, "a").Resource == nil; r = s.Recv() {
			s.Send(dack(r)) // a heartbeat of v1 before the update
		}
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
		for r = s.Recv(); resOf(t, r, "a").Resource == nil; r = s.Recv() {
			s.Send(dack(r))
		}
		s.Send(dack(r))
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
		v1 := withTTL(rawxds.Endpoints("a", 1), 100*time.Millisecond)
		e := start(t, v1)
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		r := s.Recv()
		publish(e, withTTL(rawxds.Endpoints("a", 2), 100*time.Millisecond))
		s.Send(dack(r))
		for r = s.Recv(); resOf(t, r, "a").Resource == nil; r = s.Recv() {
			s.Send(dack(r))
		}
		s.Send(dnack(r, "rejected")) // the client keeps v1
		s.Send(dunsub(eds, "a"))     // and drops it
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"a"}})
		for r = s.Recv(); resOf(t, r, "a").Resource == nil; r = s.Recv() {
			s.Send(dack(r)) // heartbeats of v1 sent before the unsubscription
		}
		s.Send(dnack(r, "rejected again")) // the client holds nothing
		s.ExpectNone()
	})

	t.Run("L2_L3_sotw_heartbeat_after_a_NACK_is_at_the_accepted_version_info", func(t *testing.T) {
		v1 := withTTL(rawxds.Endpoints("a", 1), 200*time.Millisecond)
		e := start(t, v1)
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: wrappingNode("w"), TypeUrl: eds, ResourceNames: []string{"a"}})
		r1 := s.Recv()
		publish(e, withTTL(rawxds.Endpoints("a", 2), 200*time.Millisecond))
		s.Send(ack(r1, "a"))
		r := s.Recv()
		for ; heartbeat(t, r); r = s.Recv() {
			s.Send(ack(r, "a")) // a heartbeat of v1 before the update
		}
		s.Send(nack(r, r1.VersionInfo, "rejected", "a"))
		hb := s.Recv()
		w := wrappers(t, hb)["a"]
		if hb.VersionInfo != r1.VersionInfo || w == nil || w.Resource != nil || w.Version != v1.Version {
			t.Fatalf("heartbeat after the NACK at version_info %q (wrapper %v), want the accepted %q, %s without body",
				hb.VersionInfo, w, r1.VersionInfo, v1.Version)
		}
	})

	t.Run("L2_S9_sotw_full_state_heartbeat_after_a_NACK_lists_what_the_client_kept", func(t *testing.T) {
		// Clusters are full state: a heartbeat lists every cluster, those
		// without a TTL with their body. After a NACK, that is the body
		// the client kept, not the one it rejected.
		ttl := resource.MustNew(rawxds.Cluster("t").Message, resource.WithTTL(200*time.Millisecond))
		p1 := clusterV("p", 1)
		e := start(t, ttl, p1)
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: wrappingNode("w"), TypeUrl: cds})
		r1 := s.Recv()
		publish(e, ttl, clusterV("p", 2))
		s.Send(ack(r1))
		r := s.Recv()
		for ; heartbeat(t, r); r = s.Recv() {
			s.Send(ack(r))
		}
		s.Send(nack(r, r1.VersionInfo, "rejected"))
		hb := s.Recv()
		if hb.VersionInfo != r1.VersionInfo || len(hb.Resources) != 2 || !heartbeat(t, hb) {
			t.Fatalf("heartbeat after the NACK: version_info %q, %d resources; want %q and both clusters", hb.VersionInfo, len(hb.Resources), r1.VersionInfo)
		}
		for _, a := range hb.Resources {
			if a.TypeUrl == wrapperType {
				continue
			}
			var c clusterv3.Cluster
			if err := a.UnmarshalTo(&c); err != nil || c.GetConnectTimeout().AsDuration() != time.Second {
				t.Fatalf("the cluster without TTL in the heartbeat: %v (%v), want the accepted one (1s)", &c, err)
			}
		}
	})
}
