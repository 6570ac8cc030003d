package server_test

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
)

const wrapperType = "type.googleapis.com/envoy.service.discovery.v3.Resource"

func withTTL(r *resource.Resource, d time.Duration) *resource.Resource {
	return resource.MustNew(r.Message, resource.WithTTL(d))
}

func TestTTL(t *testing.T) {
	// A virtual host with a TTL subscribed by its name and by an alias: its
	// heartbeat names it once, as its response did.
	t.Run("S11_L2_heartbeat_names_a_resource_once", func(t *testing.T) {
		vh := resource.MustNew(vhost("vh", "1", "foo.com").Message, resource.WithTTL(200*time.Millisecond))
		e := start(t, vh)
		s := vhdsStream(t, e)
		s.Send(dsub(vhds, "rc/vh", "rc/foo.com"))
		r := s.Recv()
		wantDelta(t, r, vhds, []string{"rc/vh"}, nil)
		s.Send(dack(r))
		if names := rawxds.DeltaNames(s.Recv()); len(names) != 1 {
			t.Fatalf("heartbeat names %v: the same resource more than once", names)
		}
	})
	t.Run("L1_ttl_is_sent_updated_and_removed", func(t *testing.T) {
		e := start(t, withTTL(rawxds.Endpoints("a", 1), time.Hour))
		s := e.DeltaADS(t)
		s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n"), TypeUrl: eds, ResourceNamesSubscribe: []string{"a"}})
		r := s.Recv()
		if got := r.Resources[0].GetTtl().AsDuration(); got != time.Hour {
			t.Fatalf("ttl %v, want 1h", got)
		}
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r.Nonce})
		publish(e, withTTL(rawxds.Endpoints("a", 1), 2*time.Hour))
		r = s.Recv()
		if got := r.Resources[0].GetTtl().AsDuration(); got != 2*time.Hour || r.Resources[0].Resource == nil {
			t.Fatalf("updated ttl %v (body %v), want 2h with body", got, r.Resources[0].Resource != nil)
		}
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r.Nonce})
		publish(e, rawxds.Endpoints("a", 1))
		r = s.Recv()
		if r.Resources[0].Ttl != nil || r.Resources[0].Resource == nil {
			t.Fatalf("resent without TTL: %v", r.Resources[0])
		}
	})

	t.Run("L2_heartbeats_refresh_without_body", func(t *testing.T) {
		res := withTTL(rawxds.Endpoints("a", 1), 200*time.Millisecond)
		e := start(t, res)
		s := e.DeltaADS(t)
		s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n"), TypeUrl: eds, ResourceNamesSubscribe: []string{"a"}})
		r := s.Recv()
		for range 2 {
			s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r.Nonce})
			r = s.Recv()
			hb := r.Resources[0]
			if hb.Resource != nil || hb.Name != "a" || hb.Version != res.Version || hb.GetTtl().AsDuration() != 200*time.Millisecond {
				t.Fatalf("heartbeat %v, want name, version and ttl without body", hb)
			}
		}
	})

	t.Run("L2_heartbeats_after_a_resume_at_the_current_version", func(t *testing.T) {
		// A delta client reconnects holding the TTL resource at its current
		// version (D6): nothing is resent, but its TTL must still be kept
		// alive.
		res := withTTL(rawxds.Endpoints("a", 1), 200*time.Millisecond)
		e := start(t, res)
		s := e.DeltaADS(t)
		s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n"), TypeUrl: eds, ResourceNamesSubscribe: []string{"a"},
			InitialResourceVersions: map[string]string{"a": res.Version}})
		hb := s.Recv()
		if len(hb.Resources) != 1 || hb.Resources[0].Resource != nil || hb.Resources[0].GetTtl().AsDuration() != 200*time.Millisecond {
			t.Fatalf("first response after resuming %v, want a heartbeat of a", hb)
		}
	})

	t.Run("L3_sotw_wrapper_only_for_clients_that_ask", func(t *testing.T) {
		res := withTTL(rawxds.Endpoints("a", 1), 200*time.Millisecond)
		e := start(t, res)
		plain := e.ADS(t)
		plain.Send(req(eds, "a"))
		r := plain.Recv()
		if r.Resources[0].TypeUrl != eds {
			t.Fatalf("client without the feature got %s", r.Resources[0].TypeUrl)
		}
		plain.Send(ack(r, "a"))
		plainFirst := r.VersionInfo

		// gRPC's clients spell the feature without "supports-", and take
		// a heartbeat for a malformed resource: no TTL for them unless
		// they also say they support TTLs.
		grpcClient := e.ADS(t)
		grpcClient.Send(&discovery.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"a"},
			Node: &corev3.Node{Id: "g", ClientFeatures: []string{"envoy.lb.does_not_support_overprovisioning", "xds.config.resource-in-sotw"}}})
		if r := grpcClient.Recv(); r.Resources[0].TypeUrl != eds {
			t.Fatalf("gRPC's client (no TTL feature) got %s", r.Resources[0].TypeUrl)
		}
		short := e.ADS(t)
		short.Send(&discovery.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"a"},
			Node: &corev3.Node{Id: "s", ClientFeatures: []string{"xds.config.resource-in-sotw", "xds.config.supports-resource-ttl"}}})
		var w discovery.Resource
		if r := short.Recv(); r.Resources[0].TypeUrl != wrapperType || r.Resources[0].UnmarshalTo(&w) != nil || w.Resource == nil {
			t.Fatalf("client with the short spelling and TTLs got %v", r.Resources[0])
		}

		wrapped := e.ADS(t)
		wrapped.Send(&discovery.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"a"},
			Node: &corev3.Node{Id: "w", ClientFeatures: []string{"xds.config.supports-resource-in-sotw", "xds.config.supports-resource-ttl"}}})
		r = wrapped.Recv()
		if r.Resources[0].TypeUrl != wrapperType || r.Resources[0].UnmarshalTo(&w) != nil || w.Resource == nil || w.GetTtl().AsDuration() != 200*time.Millisecond {
			t.Fatalf("client with the feature got %v", r.Resources[0])
		}
		wrapped.Send(ack(r, "a"))
		// TTLs are refreshed by sending the resource again (L1): Envoy's
		// SotW client refreshes none on a bodiless heartbeat.
		refresh(t, wrapped.Recv(), r.VersionInfo, "a", res)
		// The plain client gets no heartbeat or refresh (it could not
		// take the TTL): its next response is the real change.
		publish(e, withTTL(rawxds.Endpoints("a", 2), 200*time.Millisecond))
		if r := plain.Recv(); r.VersionInfo == plainFirst || r.Resources[0].TypeUrl != eds {
			t.Fatalf("plain client got %v, want the change from %s", r, plainFirst)
		}
	})
}
