package server_test

import (
	"context"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// edsVariants opens the streams an endpoints client may use: ADS, or the
// endpoints service of its own.
var edsVariants = []struct {
	name  string
	sotw  func(*testing.T, *rawxds.Env) *rawxds.SotW
	delta func(*testing.T, *rawxds.Env) *rawxds.Delta
}{
	{"ads",
		func(t *testing.T, e *rawxds.Env) *rawxds.SotW { return e.ADS(t) },
		func(t *testing.T, e *rawxds.Env) *rawxds.Delta { return e.DeltaADS(t) }},
	{"per_type",
		func(t *testing.T, e *rawxds.Env) *rawxds.SotW {
			c := endpointservice.NewEndpointDiscoveryServiceClient(e.Conn)
			return rawxds.Open(t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse], error) {
				return c.StreamEndpoints(ctx)
			})
		},
		func(t *testing.T, e *rawxds.Env) *rawxds.Delta {
			c := endpointservice.NewEndpointDiscoveryServiceClient(e.Conn)
			return rawxds.Open(t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse], error) {
				return c.DeltaEndpoints(ctx)
			})
		}},
}

// staleNonce opens a delta stream subscribed to endpoints a (b exists too),
// and returns it with its first response, ACKed, and its second, sent
// after a change of a and not yet ACKed: the first's nonce is stale.
func staleNonce(t *testing.T, open func(*testing.T, *rawxds.Env) *rawxds.Delta) (e *rawxds.Env, s *rawxds.Delta, r1, r2 *discovery.DeltaDiscoveryResponse) {
	e = start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
	s = open(t, e)
	s.Send(dsub(eds, "a"))
	r1 = recvAck(s)
	publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 1))
	r2 = s.Recv()
	wantDelta(t, r2, eds, []string{"a"}, nil)
	return e, s, r1, r2
}

// TestSupersededResponse checks that a request asking for more than the
// response in flight is answered without that response's reply, which
// may never come, and that the pace of one un-ACKed response per type
// holds otherwise.
func TestSupersededResponse(t *testing.T) {
	for _, v := range edsVariants {
		t.Run("S7_sotw_newer_request_answered_while_unacked/"+v.name, func(t *testing.T) {
			// Two requests sent at once, before any response: the
			// second, the latest, is answered though the first's
			// response is not ACKed.
			e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
			s := v.sotw(t, e)
			s.Send(req(eds, "a"))
			r1 := s.Recv()
			wantNames(t, r1, "a")
			s.Send(&discovery.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"b"}})
			r2 := s.Recv()
			wantNames(t, r2, "b")
			// The late reply to the first response is the first's: a
			// NACK of it counts, for its version, not the second's.
			s.Send(nack(r1, "", "late", "a"))
			s.Send(ack(r2, "b"))
			waitFor(t, func() bool { return typeStatus(t, e, eds).AckedVersion == r2.VersionInfo })
			if ts := typeStatus(t, e, eds); ts.NackMessage != "late" || ts.NackedVersion != r1.VersionInfo {
				t.Fatalf("status %+v, want the NACK of the first response's version %s", ts, r1.VersionInfo)
			}
			publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 2))
			wantNames(t, s.Recv(), "b")
		})
		t.Run("S7_sotw_pace_holds_without_a_new_request/"+v.name, func(t *testing.T) {
			// A change while a response is un-ACKed waits for its
			// reply; so does a request that asks for less.
			e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
			s := v.sotw(t, e)
			s.Send(req(eds, "a", "b"))
			r1 := s.Recv()
			publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 2))
			s.Send(&discovery.DiscoveryRequest{TypeUrl: eds, ResourceNames: []string{"a"}})
			s.ExpectNone()
			s.Send(ack(r1, "a"))
			wantNames(t, s.Recv(), "a")
		})
		t.Run("S7_delta_newer_request_answered_while_unacked/"+v.name, func(t *testing.T) {
			e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
			s := v.delta(t, e)
			s.Send(dsub(eds, "a"))
			r1 := s.Recv()
			wantDelta(t, r1, eds, []string{"a"}, nil)
			s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"b"}})
			r2 := s.Recv()
			wantDelta(t, r2, eds, []string{"b"}, nil)
			s.Send(dack(r1)) // stale now
			s.Send(dack(r2))
			waitFor(t, func() bool { return typeStatus(t, e, eds).AckedVersion == r2.SystemVersionInfo })
			publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 1))
			wantDelta(t, s.Recv(), eds, []string{"a"}, nil)
		})
		t.Run("D2_stale_nonce_subscription_answered_without_ack/"+v.name, func(t *testing.T) {
			// As Envoy does: it ACKs the response it has applied and
			// subscribes to what it brought in one request, while the
			// server has sent a newer response.
			_, s, r1, _ := staleNonce(t, v.delta)
			s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r1.Nonce, ResourceNamesSubscribe: []string{"b"}})
			wantDelta(t, recvAck(s), eds, []string{"b"}, nil)
		})
		t.Run("D2_stale_nack_subscription_answered/"+v.name, func(t *testing.T) {
			// A NACK with a stale nonce says nothing of the latest
			// response, but its subscription counts.
			e, s, r1, r2 := staleNonce(t, v.delta)
			stale := dnack(r1, "a rejected")
			stale.ResourceNamesSubscribe = []string{"b"}
			s.Send(stale)
			r3 := s.Recv()
			wantDelta(t, r3, eds, []string{"b"}, nil)
			s.Send(dack(r2)) // stale too: r3 is the latest
			s.Send(dack(r3))
			waitFor(t, func() bool { return typeStatus(t, e, eds).AckedVersion == r3.SystemVersionInfo })
			if ts := typeStatus(t, e, eds); ts.NackMessage != "" || ts.NackedVersion != "" {
				t.Fatalf("a stale NACK was recorded: %+v", ts)
			}
		})
		t.Run("D2_nack_of_a_superseded_response_is_recorded/"+v.name, func(t *testing.T) {
			// Its reply comes after the response sent in its place:
			// its NACK counts all the same.
			e, s, r1, r2 := staleNonce(t, v.delta)
			s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r1.Nonce, ResourceNamesSubscribe: []string{"b"}})
			r3 := s.Recv()
			wantDelta(t, r3, eds, []string{"b"}, nil)
			s.Send(dnack(r2, "a v2 rejected"))
			waitFor(t, func() bool { return typeStatus(t, e, eds).NackMessage == "a v2 rejected" })
			if ts := typeStatus(t, e, eds); ts.NackedVersion != r2.SystemVersionInfo {
				t.Fatalf("NACK recorded for version %q, want r2's %q", ts.NackedVersion, r2.SystemVersionInfo)
			}
			s.Send(dack(r3))
			waitFor(t, func() bool { return typeStatus(t, e, eds).AckedVersion == r3.SystemVersionInfo })
		})
		t.Run("D2_first_request_with_a_nonce_keeps_initial_versions/"+v.name, func(t *testing.T) {
			// A client back from another stream (or replica) may carry
			// a nonce this stream never sent: what it says it holds
			// still counts (D6).
			a := rawxds.Endpoints("a", 1)
			e := start(t, a, rawxds.Endpoints("b", 1))
			s := v.delta(t, e)
			first := dsub(eds, "a", "b")
			first.ResponseNonce = "from-another-stream"
			first.InitialResourceVersions = map[string]string{"a": a.Version}
			s.Send(first)
			wantDelta(t, recvAck(s), eds, []string{"b"}, nil)
		})
		t.Run("D2_pace_holds_for_an_unsubscription/"+v.name, func(t *testing.T) {
			// Asking for less needs no answer: a change still waits
			// for the reply to the response in flight.
			e := start(t, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
			s := v.delta(t, e)
			s.Send(dsub(eds, "a", "b"))
			r1 := s.Recv()
			publish(e, rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 2))
			s.Send(dunsub(eds, "b"))
			s.ExpectNone()
			s.Send(dack(r1))
			wantDelta(t, s.Recv(), eds, []string{"a"}, nil)
		})
	}
}
