package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
)

const vhds = resource.VirtualHostType

// dsub is an incremental request subscribing names (and, as on a first
// request, carrying the node).
func dsub(typeURL string, names ...string) *discovery.DeltaDiscoveryRequest {
	return &discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: typeURL, ResourceNamesSubscribe: names}
}

// dunsub is a spontaneous request unsubscribing names.
func dunsub(typeURL string, names ...string) *discovery.DeltaDiscoveryRequest {
	return &discovery.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesUnsubscribe: names}
}

func dack(resp *discovery.DeltaDiscoveryResponse) *discovery.DeltaDiscoveryRequest {
	return &discovery.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}
}

func dnack(resp *discovery.DeltaDiscoveryResponse, msg string) *discovery.DeltaDiscoveryRequest {
	return &discovery.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: msg}}
}

// recvAck receives the next response and ACKs it.
func recvAck(s *rawxds.Delta) *discovery.DeltaDiscoveryResponse {
	r := s.Recv()
	s.Send(dack(r))
	return r
}

// wantDelta checks a response's type, resource names and removed names.
func wantDelta(t *testing.T, r *discovery.DeltaDiscoveryResponse, typeURL string, names, removed []string) {
	t.Helper()
	got := slices.Sorted(slices.Values(rawxds.DeltaNames(r)))
	gotRm := slices.Sorted(slices.Values(r.GetRemovedResources()))
	want := slices.Sorted(slices.Values(names))
	wantRm := slices.Sorted(slices.Values(removed))
	if r.GetTypeUrl() != typeURL || !slices.Equal(got, want) || !slices.Equal(gotRm, wantRm) {
		t.Fatalf("got %s response resources %v removed %v, want %s resources %v removed %v",
			r.GetTypeUrl(), got, gotRm, typeURL, want, wantRm)
	}
}

// collect receives (and ACKs) responses of typeURL until together they
// carry at least names and removed, then checks that they carry exactly
// those. It tolerates the server splitting upserts and removals.
func collect(t *testing.T, s *rawxds.Delta, typeURL string, names, removed []string) {
	t.Helper()
	got, gotRm := map[string]bool{}, map[string]bool{}
	covers := func() bool {
		for _, n := range names {
			if !got[n] {
				return false
			}
		}
		for _, n := range removed {
			if !gotRm[n] {
				return false
			}
		}
		return true
	}
	var all, allRm []string
	for i := 0; !covers(); i++ {
		if i == 3 {
			t.Fatalf("after 3 responses got resources %v removed %v, want %v removed %v", all, allRm, names, removed)
		}
		r := recvAck(s)
		if r.GetTypeUrl() != typeURL {
			t.Fatalf("got %s response %v, want %s", r.GetTypeUrl(), rawxds.DeltaNames(r), typeURL)
		}
		for _, n := range rawxds.DeltaNames(r) {
			got[n] = true
			all = append(all, n)
		}
		for _, n := range r.GetRemovedResources() {
			gotRm[n] = true
			allRm = append(allRm, n)
		}
	}
	slices.Sort(all)
	slices.Sort(allRm)
	if !slices.Equal(all, slices.Sorted(slices.Values(names))) || !slices.Equal(allRm, slices.Sorted(slices.Values(removed))) {
		t.Fatalf("got resources %v removed %v, want %v removed %v", all, allRm, names, removed)
	}
}

// probes numbers the names barrier subscribes to.
var probes atomic.Int64

// barrier makes sure the server has applied every request sent so far on s
// (an ADS stream): it subscribes to a runtime layer that does not exist and
// waits for the answer saying so (D5), which comes after every earlier
// request of the stream has been handled. Requests that change a
// subscription without sending anything need it before a publish.
func barrier(t *testing.T, s *rawxds.Delta) {
	t.Helper()
	name := fmt.Sprintf("probe-%d", probes.Add(1))
	s.Send(dsub(resource.RuntimeType, name))
	wantDelta(t, recvAck(s), resource.RuntimeType, []string{name}, nil)
}

// resOf returns the entry named name in a delta response, failing if absent.
func resOf(t *testing.T, r *discovery.DeltaDiscoveryResponse, name string) *discovery.Resource {
	t.Helper()
	for _, x := range r.GetResources() {
		if x.GetName() == name {
			return x
		}
	}
	t.Fatalf("%s response has no resource %q (has %v)", r.GetTypeUrl(), name, rawxds.DeltaNames(r))
	return nil
}

// clusterV is rawxds.Cluster with content that varies with v.
func clusterV(name string, v int64) *resource.Resource {
	c := proto.Clone(rawxds.Cluster(name).Message).(*clusterv3.Cluster)
	c.ConnectTimeout = durationpb.New(time.Duration(v) * time.Second)
	return resource.MustNew(c)
}

// vhost is a VHDS virtual host "rc/<name>" whose content varies with tag.
func vhost(name, tag string, domains ...string) *resource.Resource {
	return resource.MustNew(&routev3.VirtualHost{Name: "rc/" + name, Domains: domains, RequestHeadersToRemove: []string{"x-" + tag}})
}

// vhdsStream opens an incremental VHDS stream.
func vhdsStream(t *testing.T, e *rawxds.Env) *rawxds.Delta {
	c := routeservice.NewVirtualHostDiscoveryServiceClient(e.Conn)
	return rawxds.Open[*discovery.DeltaDiscoveryRequest, *discovery.DeltaDiscoveryResponse](t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse], error) {
		return c.DeltaVirtualHosts(ctx)
	})
}

func TestDelta(t *testing.T) {
	// A wildcard with nothing to send still gets a first response, empty,
	// by "*" or by the legacy empty list: Envoy ends the first fetch on it.
	// Named resources that do not exist are answered as D5 says.
	t.Run("wildcard_with_nothing_gets_an_empty_first_response", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1))
		for _, sub := range [][]string{{"*"}, nil} {
			s := e.DeltaADS(t)
			s.Send(dsub(cds, sub...))
			s.Send(dsub(lds, sub...))
			wantDelta(t, recvAck(s), cds, nil, nil)
			wantDelta(t, recvAck(s), lds, nil, nil)
			s.ExpectNone()
			publish(e, rawxds.Endpoints("a", 1), rawxds.Cluster("c"))
			wantDelta(t, recvAck(s), cds, []string{"c"}, nil)
			publish(e, rawxds.Endpoints("a", 1))
			s.Close()
		}
	})
	t.Run("D1_per_resource_versions", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 2))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a", "b"))
		r := recvAck(s)
		wantDelta(t, r, eds, []string{"a", "b"}, nil)
		for _, want := range []*resource.Resource{rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 2)} {
			got := resOf(t, r, want.Name)
			if got.GetVersion() == "" || got.GetVersion() != want.Version {
				t.Fatalf("%s version = %q, want %q", want.Name, got.GetVersion(), want.Version)
			}
			if d := cmp.Diff(want.Body, got.GetResource(), protocmp.Transform()); d != "" {
				t.Fatalf("%s body differs from the snapshot's (-want +got):\n%s", want.Name, d)
			}
		}
		if resOf(t, r, "a").GetVersion() == resOf(t, r, "b").GetVersion() {
			t.Fatal("different resources share a version")
		}
		publish(e, rawxds.Endpoints("a", 3), rawxds.Endpoints("b", 2))
		r2 := recvAck(s)
		wantDelta(t, r2, eds, []string{"a"}, nil)
		if v := resOf(t, r2, "a").GetVersion(); v != rawxds.Endpoints("a", 3).Version || v == resOf(t, r, "a").GetVersion() {
			t.Fatalf("changed a has version %q, want %q", v, rawxds.Endpoints("a", 3).Version)
		}
	})

	t.Run("D2_nonce_on_every_response", func(t *testing.T) {
		e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Endpoints("a", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(cds, "*"))
		r1 := recvAck(s) // upserts
		s.Send(dsub(eds, "a", "nope"))
		r2 := recvAck(s) // with a name-only entry
		publish(e, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
		r3 := recvAck(s) // removals only
		wantDelta(t, r3, cds, nil, []string{"b"})
		seen := map[string]bool{}
		for _, r := range []*discovery.DeltaDiscoveryResponse{r1, r2, r3} {
			if r.Nonce == "" || seen[r.Nonce] {
				t.Fatalf("response %v has an empty or repeated nonce", r)
			}
			seen[r.Nonce] = true
		}
	})

	t.Run("D2_ack_and_nack_recorded", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		r1 := s.Recv()
		s.Send(dack(r1))
		var acked string
		waitFor(t, func() bool {
			ts := typeStatus(t, e, eds)
			acked = ts.AckedVersion
			return ts.SentNonce == r1.Nonce && acked != "" && acked == ts.SentVersion
		})
		if r1.SystemVersionInfo != "" && acked != r1.SystemVersionInfo {
			t.Fatalf("acked version %q, response system_version_info %q", acked, r1.SystemVersionInfo)
		}
		if ts := typeStatus(t, e, eds); ts.NackedVersion != "" || ts.NackMessage != "" {
			t.Fatalf("ACK recorded as NACK: %+v", ts)
		}
		publish(e, rawxds.Endpoints("a", 2))
		r2 := s.Recv()
		s.Send(dnack(r2, "endpoints a rejected"))
		waitFor(t, func() bool { return typeStatus(t, e, eds).NackMessage == "endpoints a rejected" })
		ts := typeStatus(t, e, eds)
		if ts.SentNonce != r2.Nonce || ts.NackedVersion != ts.SentVersion || ts.NackedVersion == acked || ts.AckedVersion != acked {
			t.Fatalf("status after NACK = %+v, want nacked the sent version and acked still %s", ts, acked)
		}
	})

	t.Run("D2_stale_nonce_still_changes_subscription", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1), rawxds.Endpoints("c", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		r1 := recvAck(s)
		publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 1), rawxds.Endpoints("c", 1))
		r2 := s.Recv() // not ACKed yet: r1's nonce is now stale
		wantDelta(t, r2, eds, []string{"a"}, nil)
		stale := &discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r1.Nonce, ResourceNamesSubscribe: []string{"b"}}
		s.Send(stale)
		s.Send(dack(r2))
		wantDelta(t, recvAck(s), eds, []string{"b"}, nil)
		// So is a nonce the server never sent.
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: "no-such-nonce", ResourceNamesSubscribe: []string{"c"}})
		wantDelta(t, recvAck(s), eds, []string{"c"}, nil)
		// An unsubscription with a stale nonce is honoured too.
		stale = &discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r1.Nonce, ResourceNamesUnsubscribe: []string{"a"}}
		s.Send(stale)
		barrier(t, s)
		publish(e, rawxds.Endpoints("a", 3), rawxds.Endpoints("b", 2), rawxds.Endpoints("c", 1))
		wantDelta(t, recvAck(s), eds, []string{"b"}, nil)
	})

	t.Run("D3_subscribe_and_unsubscribe", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1), rawxds.Endpoints("c", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		wantDelta(t, recvAck(s), eds, []string{"a"}, nil)
		s.Send(dsub(eds, "b"))
		wantDelta(t, recvAck(s), eds, []string{"b"}, nil) // a is not resent
		s.Send(dunsub(eds, "a"))
		barrier(t, s)
		publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 2), rawxds.Endpoints("c", 2))
		wantDelta(t, recvAck(s), eds, []string{"b"}, nil)
	})

	t.Run("D3_named_type_first_request_without_names_is_not_wildcard", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds))
		s.Send(dsub(eds, "a"))
		wantDelta(t, recvAck(s), eds, []string{"a"}, nil)
	})

	t.Run("D3_explicit_wildcard", func(t *testing.T) {
		e := start(t, clusterV("a", 1), clusterV("b", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(cds, "*", "a"))
		wantDelta(t, recvAck(s), cds, []string{"a", "b"}, nil)
		publish(e, clusterV("a", 1), clusterV("b", 1), clusterV("c", 1))
		wantDelta(t, recvAck(s), cds, []string{"c"}, nil)
		// Unsubscribing "*" ends the wildcard and keeps a.
		s.Send(dunsub(cds, "*"))
		barrier(t, s)
		publish(e, clusterV("a", 2), clusterV("b", 2), clusterV("c", 2), clusterV("d", 1))
		wantDelta(t, recvAck(s), cds, []string{"a"}, nil)
	})

	t.Run("D3_legacy_wildcard", func(t *testing.T) {
		e := start(t, clusterV("a", 1), clusterV("b", 1), rawxds.Endpoints("x", 1))
		s := e.DeltaADS(t)
		s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: cds}) // never named: wildcard
		wantDelta(t, recvAck(s), cds, []string{"a", "b"}, nil)
		publish(e, clusterV("a", 1), clusterV("b", 1), clusterV("c", 1), rawxds.Endpoints("x", 1))
		wantDelta(t, recvAck(s), cds, []string{"c"}, nil)
		// Naming a keeps the wildcard (unlike SotW) and adds a (sent again: D8).
		s.Send(dsub(cds, "a"))
		wantDelta(t, recvAck(s), cds, []string{"a"}, nil)
		publish(e, clusterV("a", 1), clusterV("b", 1), clusterV("c", 1), clusterV("d", 1), rawxds.Endpoints("x", 1))
		wantDelta(t, recvAck(s), cds, []string{"d"}, nil)
		// Unsubscribing "*" ends the wildcard and keeps a.
		s.Send(dunsub(cds, "*"))
		barrier(t, s)
		publish(e, clusterV("a", 2), clusterV("b", 2), clusterV("c", 1), clusterV("d", 1), clusterV("e", 1), rawxds.Endpoints("x", 1))
		wantDelta(t, recvAck(s), cds, []string{"a"}, nil)
		// Unsubscribing a leaves nothing: the empty set is not a wildcard.
		s.Send(dunsub(cds, "a"))
		s.Send(dsub(eds, "x"))
		wantDelta(t, recvAck(s), eds, []string{"x"}, nil)
		publish(e, clusterV("a", 3), clusterV("f", 1), rawxds.Endpoints("x", 2))
		wantDelta(t, recvAck(s), eds, []string{"x"}, nil) // no cluster response came first
	})

	t.Run("D4_only_changes_sent", func(t *testing.T) {
		e := start(t, clusterV("a", 1), clusterV("b", 1), clusterV("c", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(cds, "*"))
		wantDelta(t, recvAck(s), cds, []string{"a", "b", "c"}, nil)
		publish(e, clusterV("a", 2), clusterV("b", 1), clusterV("c", 1))
		wantDelta(t, recvAck(s), cds, []string{"a"}, nil)
	})

	t.Run("D4_removed_explicit_name", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1), rawxds.Endpoints("z", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a", "b"))
		wantDelta(t, recvAck(s), eds, []string{"a", "b"}, nil)
		publish(e, rawxds.Endpoints("a", 1))
		// b was held: removed. z was never sent: not mentioned.
		wantDelta(t, recvAck(s), eds, nil, []string{"b"})
	})

	t.Run("D4_removed_wildcard_covered", func(t *testing.T) {
		e := start(t, clusterV("a", 1), clusterV("b", 1), clusterV("c", 1))
		s := e.DeltaADS(t)
		s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: cds}) // legacy wildcard
		wantDelta(t, recvAck(s), cds, []string{"a", "b", "c"}, nil)
		publish(e, clusterV("a", 2), clusterV("c", 1))
		collect(t, s, cds, []string{"a"}, []string{"b"})
		// Explicit "*" as well.
		s2 := e.DeltaADS(t)
		s2.Send(dsub(cds, "*"))
		wantDelta(t, recvAck(s2), cds, []string{"a", "c"}, nil)
		publish(e, clusterV("a", 2))
		collect(t, s2, cds, nil, []string{"c"})
	})

	// A client that stops naming a cluster while the response carrying it
	// is in flight, and subscribes to every cluster before it ACKs, takes
	// the cluster in with that response (as Envoy does under a wildcard):
	// deleted meanwhile, it must be removed.
	t.Run("D4_removed_after_an_unsubscribe_a_response_in_flight_overtook", func(t *testing.T) {
		e := start(t, clusterV("a", 1), clusterV("b", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(cds, "a"))
		r1 := s.Recv()
		wantDelta(t, r1, cds, []string{"a"}, nil)
		s.Send(dunsub(cds, "a"))
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: cds, ResourceNamesSubscribe: []string{"*"}})
		// No barrier: the outcome is the same whether the server takes
		// the publication before, between or after the two requests,
		// though the wildcard's answer (S7: it does not wait for r1's
		// ACK) may send a again first.
		publish(e, clusterV("b", 1))
		s.Send(dack(r1))
		held := map[string]bool{"a": true}
		for i := 0; !held["b"] || held["a"]; i++ {
			if i == 3 {
				t.Fatalf("after 3 responses the client holds %v, want b only", held)
			}
			r := recvAck(s)
			for _, n := range rawxds.DeltaNames(r) {
				held[n] = true
			}
			for _, n := range r.GetRemovedResources() {
				delete(held, n)
			}
		}
	})

	t.Run("D4_removed_name_is_not_renotified", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a", "b"))
		wantDelta(t, recvAck(s), eds, []string{"a", "b"}, nil)
		publish(e, rawxds.Endpoints("a", 1), rawxds.Endpoints("c", 1))
		wantDelta(t, recvAck(s), eds, nil, []string{"b"})
		// The client already knows b is gone: a new subscription sends only c.
		s.Send(dsub(eds, "c"))
		wantDelta(t, recvAck(s), eds, []string{"c"}, nil)
	})

	t.Run("D5_missing_name_answered_at_once", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Cluster("c1"))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a", "nope"))
		r := recvAck(s)
		wantDelta(t, r, eds, []string{"a", "nope"}, nil)
		if resOf(t, r, "a").GetResource() == nil {
			t.Fatal("existing a sent without a body")
		}
		if x := resOf(t, r, "nope"); x.GetResource() != nil {
			t.Fatalf("missing name sent with a body: %v", x)
		}
		// When it appears it is sent with its body.
		publish(e, rawxds.Endpoints("a", 1), rawxds.Endpoints("nope", 1), rawxds.Cluster("c1"))
		r = recvAck(s)
		wantDelta(t, r, eds, []string{"nope"}, nil)
		if resOf(t, r, "nope").GetResource() == nil || resOf(t, r, "nope").GetVersion() != rawxds.Endpoints("nope", 1).Version {
			t.Fatalf("nope sent as %v", resOf(t, r, "nope"))
		}
		// A wildcard type's explicit missing name is answered too.
		s.Send(dsub(cds, "c1", "ghost"))
		r = recvAck(s)
		wantDelta(t, r, cds, []string{"c1", "ghost"}, nil)
		if resOf(t, r, "ghost").GetResource() != nil {
			t.Fatal("missing cluster sent with a body")
		}
	})

	t.Run("D6_initial_resource_versions_wildcard", func(t *testing.T) {
		e := start(t, clusterV("a", 1), clusterV("b", 1), clusterV("c", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(cds, "*"))
		r := recvAck(s)
		wantDelta(t, r, cds, []string{"a", "b", "c"}, nil)
		held := map[string]string{}
		for _, x := range r.Resources {
			held[x.Name] = x.Version
		}
		s.Close()
		publish(e, clusterV("a", 1), clusterV("b", 2), clusterV("d", 1)) // a same, b changed, c gone, d new
		for _, legacy := range []bool{false, true} {
			s2 := e.DeltaADS(t)
			first := &discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: cds, InitialResourceVersions: held}
			if !legacy {
				first.ResourceNamesSubscribe = []string{"*"}
			}
			s2.Send(first)
			collect(t, s2, cds, []string{"b", "d"}, []string{"c"})
			// Barrier: the next response is the next change, not a.
			publish(e, clusterV("a", 1), clusterV("b", 2), clusterV("d", 1), clusterV("e", 1))
			wantDelta(t, recvAck(s2), cds, []string{"e"}, nil)
			s2.Close()
			publish(e, clusterV("a", 1), clusterV("b", 2), clusterV("d", 1))
		}
	})

	t.Run("D6_initial_resource_versions_named", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1), rawxds.Endpoints("c", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a", "b", "c"))
		r := recvAck(s)
		held := map[string]string{}
		for _, x := range r.Resources {
			held[x.Name] = x.Version
		}
		s.Close()
		publish(e, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 2)) // c gone
		s2 := e.DeltaADS(t)
		first := dsub(eds, "a", "b", "c")
		first.InitialResourceVersions = held
		s2.Send(first)
		collect(t, s2, eds, []string{"b"}, []string{"c"})
		publish(e, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 3))
		wantDelta(t, recvAck(s2), eds, []string{"b"}, nil)
	})

	t.Run("D7_subscribe_by_alias", func(t *testing.T) {
		e := start(t, vhost("vh", "1", "foo.com", "bar.com"), vhost("vh2", "1", "baz.com"))
		s := vhdsStream(t, e)
		s.Send(dsub(vhds, "rc/foo.com"))
		r := recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh"}, nil)
		x := resOf(t, r, "rc/vh")
		if !slices.Equal(x.GetAliases(), []string{"rc/foo.com"}) || x.GetResource() == nil || x.GetVersion() != vhost("vh", "1", "foo.com", "bar.com").Version {
			t.Fatalf("alias subscription answered with %v", x)
		}
		// An update is sent under the alias too.
		publish(e, vhost("vh", "2", "foo.com", "bar.com"), vhost("vh2", "1", "baz.com"))
		r = recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh"}, nil)
		if x := resOf(t, r, "rc/vh"); !slices.Equal(x.GetAliases(), []string{"rc/foo.com"}) || x.GetVersion() != vhost("vh", "2", "foo.com", "bar.com").Version {
			t.Fatalf("update answered with %v", x)
		}
		// By name: no alias.
		s.Send(dsub(vhds, "rc/vh2"))
		r = recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh2"}, nil)
		if x := resOf(t, r, "rc/vh2"); len(x.GetAliases()) != 0 || x.GetResource() == nil {
			t.Fatalf("name subscription answered with %v", x)
		}
	})

	t.Run("D7_unknown_alias", func(t *testing.T) {
		e := start(t, vhost("vh", "1", "foo.com"))
		s := vhdsStream(t, e)
		s.Send(dsub(vhds, "rc/nope.com"))
		r := recvAck(s)
		if len(r.Resources) != 1 || len(r.RemovedResources) != 0 {
			t.Fatalf("got resources %v removed %v, want one name-only entry", rawxds.DeltaNames(r), r.RemovedResources)
		}
		if x := r.Resources[0]; x.GetResource() != nil || !slices.Contains(append(x.GetAliases(), x.GetName()), "rc/nope.com") {
			t.Fatalf("unknown alias answered with %v", x)
		}
		// When a vhost gains that domain, it is sent under the alias.
		publish(e, vhost("vh", "1", "foo.com", "nope.com"))
		r = recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh"}, nil)
		if x := resOf(t, r, "rc/vh"); !slices.Equal(x.GetAliases(), []string{"rc/nope.com"}) || x.GetResource() == nil {
			t.Fatalf("late alias answered with %v", x)
		}
	})

	t.Run("D7_unsubscribe_by_alias", func(t *testing.T) {
		e := start(t, vhost("vh", "1", "foo.com"), vhost("vh2", "1", "baz.com"))
		s := vhdsStream(t, e)
		s.Send(dsub(vhds, "rc/foo.com", "rc/baz.com"))
		wantDelta(t, recvAck(s), vhds, []string{"rc/vh", "rc/vh2"}, nil)
		// The unsubscription carries a probe (a missing alias) whose answer
		// shows that the server applied it.
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: vhds, ResourceNamesUnsubscribe: []string{"rc/foo.com"}, ResourceNamesSubscribe: []string{"rc/probe"}})
		wantDelta(t, recvAck(s), vhds, []string{"rc/probe"}, nil)
		publish(e, vhost("vh", "2", "foo.com"), vhost("vh2", "2", "baz.com"))
		r := recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh2"}, nil)
		if x := resOf(t, r, "rc/vh2"); !slices.Equal(x.GetAliases(), []string{"rc/baz.com"}) {
			t.Fatalf("vh2 update answered with %v", x)
		}
	})

	t.Run("D7_unsubscribe_alias_under_wildcard", func(t *testing.T) {
		// Found by FuzzDeltaRequests: with the wildcard on, unsubscribing
		// an alias was answered as if the alias did not exist.
		e := start(t, vhost("vh", "1", "foo.com"))
		s := vhdsStream(t, e)
		s.Send(dsub(vhds, "rc/foo.com", "*"))
		wantDelta(t, recvAck(s), vhds, []string{"rc/vh"}, nil)
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: vhds, ResourceNamesUnsubscribe: []string{"rc/foo.com"}, ResourceNamesSubscribe: []string{"rc/probe"}})
		// Only the probe's answer: nothing about the alias.
		wantDelta(t, recvAck(s), vhds, []string{"rc/probe"}, nil)
		publish(e, vhost("vh", "2", "foo.com"))
		r := recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh"}, nil)
		if x := resOf(t, r, "rc/vh"); len(x.GetAliases()) != 0 {
			t.Fatalf("the update carries aliases %v, though the client unsubscribed the alias", x.GetAliases())
		}
	})

	t.Run("D4_removed_while_held_by_an_alias_only", func(t *testing.T) {
		// The client holds rc/vh only under its alias;
		// rc/vh is removed while that response is un-ACKed; the client
		// then trades the alias for the wildcard. It must be told rc/vh
		// is gone, or it keeps it for good.
		e := start(t, rawxds.Cluster("c1"), vhost("vh", "1", "foo.com"), vhost("vh2", "1", "baz.com"))
		s := e.DeltaADS(t)
		s.Send(dsub(cds, "*"))
		wantDelta(t, recvAck(s), cds, []string{"c1"}, nil)
		s.Send(dsub(vhds, "rc/foo.com"))
		r1 := s.Recv() // not ACKed yet
		wantDelta(t, r1, vhds, []string{"rc/vh"}, nil)
		publish(e, clusterV("c1", 2), vhost("vh2", "1", "baz.com"))
		wantDelta(t, recvAck(s), cds, []string{"c1"}, nil) // the publication's push has run, holding vhds back
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: vhds, ResponseNonce: r1.Nonce,
			ResourceNamesSubscribe: []string{"*", "rc/probe"}, ResourceNamesUnsubscribe: []string{"rc/foo.com"}})
		removed := false
		for probed := false; !probed; {
			r := recvAck(s)
			removed = removed || slices.Contains(r.GetRemovedResources(), "rc/vh")
			probed = slices.Contains(rawxds.DeltaNames(r), "rc/probe")
			if slices.Contains(rawxds.DeltaNames(r), "rc/vh") {
				t.Fatalf("rc/vh, which is gone, sent again: %v", rawxds.DeltaNames(r))
			}
		}
		if !removed {
			t.Fatal("the client was never told that rc/vh is gone")
		}
	})

	t.Run("D7_one_entry_per_resource", func(t *testing.T) {
		// Envoy rejects a delta response naming a resource twice (in
		// resources, or across resources and removed_resources), so a vhost
		// held under two aliases, as on-demand lookups of two of its domains
		// leave it, must still be sent and removed once.
		e := start(t, vhost("vh", "1", "foo.com", "bar.com"))
		s := vhdsStream(t, e)
		s.Send(dsub(vhds, "rc/foo.com"))
		wantDelta(t, recvAck(s), vhds, []string{"rc/vh"}, nil)
		s.Send(dsub(vhds, "rc/bar.com"))
		r := recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh"}, nil)
		if x := resOf(t, r, "rc/vh"); !slices.Contains(x.GetAliases(), "rc/bar.com") {
			t.Fatalf("second alias answered with %v", x)
		}
		publish(e, vhost("vh", "2", "foo.com", "bar.com"))
		r = recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh"}, nil)
		x := resOf(t, r, "rc/vh")
		if x.GetVersion() != vhost("vh", "2", "foo.com", "bar.com").Version {
			t.Fatalf("update answered with %v", x)
		}
		for _, a := range x.GetAliases() {
			if a != "rc/foo.com" && a != "rc/bar.com" {
				t.Fatalf("update lists alias %q that was not subscribed", a)
			}
		}
		publish(e)
		wantDelta(t, recvAck(s), vhds, nil, []string{"rc/vh"})
	})

	t.Run("D7_alias_on_ads", func(t *testing.T) {
		e := start(t, vhost("vh", "1", "foo.com"))
		s := e.DeltaADS(t)
		s.Send(dsub(vhds, "rc/foo.com"))
		r := recvAck(s)
		wantDelta(t, r, vhds, []string{"rc/vh"}, nil)
		if x := resOf(t, r, "rc/vh"); !slices.Equal(x.GetAliases(), []string{"rc/foo.com"}) {
			t.Fatalf("alias subscription answered with %v", x)
		}
	})

	t.Run("D8_resubscribe_sends_again", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), clusterV("c1", 1), clusterV("c2", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		r1 := recvAck(s)
		s.Send(dsub(eds, "a"))
		r2 := recvAck(s)
		wantDelta(t, r2, eds, []string{"a"}, nil)
		if resOf(t, r2, "a").GetVersion() != resOf(t, r1, "a").GetVersion() || resOf(t, r2, "a").GetResource() == nil {
			t.Fatalf("resent a is %v", resOf(t, r2, "a"))
		}
		// A name already covered by the wildcard is sent again when named.
		s.Send(dsub(cds, "*"))
		wantDelta(t, recvAck(s), cds, []string{"c1", "c2"}, nil)
		s.Send(dsub(cds, "c1"))
		wantDelta(t, recvAck(s), cds, []string{"c1"}, nil)
	})

	t.Run("D9_unsubscribe_unknown_name_is_ignored", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a"))
		wantDelta(t, recvAck(s), eds, []string{"a"}, nil)
		s.Send(dunsub(eds, "nope", "b")) // never subscribed, one of them not even existing
		s.Send(dunsub(eds, "nope"))
		// Barrier: the stream is alive and the next response is the new one.
		s.Send(dsub(eds, "b"))
		wantDelta(t, recvAck(s), eds, []string{"b"}, nil)
		publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 1))
		wantDelta(t, recvAck(s), eds, []string{"a"}, nil) // a still subscribed
		if st := e.Server.Status(); len(st) != 1 || st[0].LastError != "" {
			t.Fatalf("status after unknown unsubscribe = %+v", st)
		}
	})

	t.Run("D10_nacked_version_not_resent", func(t *testing.T) {
		e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1), rawxds.Endpoints("c", 1))
		s := e.DeltaADS(t)
		s.Send(dsub(eds, "a", "b"))
		r1 := s.Recv()
		s.Send(dack(r1))
		var acked string
		waitFor(t, func() bool {
			ts := typeStatus(t, e, eds)
			acked = ts.AckedVersion
			return ts.SentNonce == r1.Nonce && acked != ""
		})
		publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 1), rawxds.Endpoints("c", 1))
		r2 := s.Recv()
		wantDelta(t, r2, eds, []string{"a"}, nil)
		s.Send(dnack(r2, "a2 is bad"))
		waitFor(t, func() bool { return typeStatus(t, e, eds).NackMessage == "a2 is bad" })
		if ts := typeStatus(t, e, eds); ts.NackedVersion != ts.SentVersion || ts.SentNonce != r2.Nonce || ts.AckedVersion != acked {
			t.Fatalf("status after NACK = %+v, want nacked the sent version, acked still %s", ts, acked)
		}
		// The rejected a2 is not sent again: neither with another change...
		publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 2), rawxds.Endpoints("c", 1))
		wantDelta(t, recvAck(s), eds, []string{"b"}, nil)
		// ...nor when the subscription changes.
		s.Send(dsub(eds, "c"))
		wantDelta(t, recvAck(s), eds, []string{"c"}, nil)
		// A fixed version is sent.
		publish(e, rawxds.Endpoints("a", 3), rawxds.Endpoints("b", 2), rawxds.Endpoints("c", 1))
		r3 := s.Recv()
		wantDelta(t, r3, eds, []string{"a"}, nil)
		if v := resOf(t, r3, "a").GetVersion(); v != rawxds.Endpoints("a", 3).Version {
			t.Fatalf("fixed a has version %q", v)
		}
		s.Send(dack(r3))
		waitFor(t, func() bool {
			ts := typeStatus(t, e, eds)
			return ts.SentNonce == r3.Nonce && ts.AckedVersion == ts.SentVersion
		})
	})
}
