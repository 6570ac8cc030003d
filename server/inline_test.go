package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// On h2grpc a plain ACK is taken on the connection's reader goroutine,
// without the stream's handler (server/inline.go). These tests make the
// ACK the only thing that can release a response held behind the one it
// ACKs: the publication's push has sent the clusters, whose ACK has been
// recorded (so the push is over), and held the endpoints back (their
// response is not ACKed yet).

// startNoTimers is start with a warm gate that never times out within a
// test: no timer wakes the stream, only the client's requests do.
func startNoTimers(t *testing.T, rs ...*resource.Resource) *rawxds.Env {
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(rs...))
	return rawxds.Start(t, c, server.Config{WarmTimeout: time.Hour})
}

func TestInlineAckReleasesHeldResponseDelta(t *testing.T) {
	e := startNoTimers(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1))
	s := e.DeltaADS(t)
	s.Send(dsub(cds))
	wantDelta(t, recvAck(s), cds, []string{"c1"}, nil)
	s.Send(dsub(eds, "c1"))
	r1 := s.Recv() // not ACKed yet
	wantDelta(t, r1, eds, []string{"c1"}, nil)

	publish(e, clusterV("c1", 2), rawxds.Endpoints("c1", 2))
	rc2 := recvAck(s)
	wantDelta(t, rc2, cds, []string{"c1"}, nil)
	waitFor(t, func() bool { return typeStatus(t, e, cds).AckedVersion == rc2.SystemVersionInfo }) // the push is over
	s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r1.Nonce, Node: rawxds.Node("n1")})
	r2 := s.Recv()
	wantDelta(t, r2, eds, []string{"c1"}, nil)
	if r2.Nonce == r1.Nonce {
		t.Fatal("the held response repeats the first one's nonce")
	}
	s.Send(dack(r2))
	waitFor(t, func() bool { return typeStatus(t, e, eds).AckedVersion == r2.SystemVersionInfo })
}

func TestInlineAckReleasesHeldResponseSotW(t *testing.T) {
	e := startNoTimers(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1))
	s := e.ADS(t)
	s.Send(req(cds))
	rc := s.Recv()
	s.Send(ack(rc))
	s.Send(req(eds, "c1"))
	r1 := s.Recv() // not ACKed yet
	wantNames(t, r1, "c1")

	publish(e, clusterV("c1", 2), rawxds.Endpoints("c1", 2))
	rc2 := s.Recv()
	if rc2.TypeUrl != cds {
		t.Fatalf("got a %s response first, want the clusters", rc2.TypeUrl)
	}
	s.Send(ack(rc2))
	waitFor(t, func() bool { return typeStatus(t, e, cds).AckedVersion == rc2.VersionInfo }) // the push is over
	s.Send(ack(r1, "c1"))
	r2 := s.Recv()
	if r2.TypeUrl != eds || r2.VersionInfo == r1.VersionInfo {
		t.Fatalf("got %s version %s, want the endpoints' new version (not %s)", r2.TypeUrl, r2.VersionInfo, r1.VersionInfo)
	}
	s.Send(ack(r2, "c1"))
	waitFor(t, func() bool { return typeStatus(t, e, eds).AckedVersion == r2.VersionInfo })
}

// TestInlineLeavesMalformedNodeToHandler: an ACK that repeats a node the
// handler could not decode (malformed, or with an id that is not UTF-8, or
// given twice, the first bad: protobuf merges them) is not taken inline as
// a plain ACK; the stream fails as it would on any undecodable request.
func TestInlineLeavesMalformedNodeToHandler(t *testing.T) {
	good, _ := proto.Marshal(rawxds.Node("n1"))
	badID := []byte{0x0a, 0x02, 0xff, 0xfe}
	for name, nodes := range map[string][][]byte{ // the node fields of the ACK
		"truncated field":    {{0x0a, 0x05, 'n'}},
		"id not UTF-8":       {badID},
		"good, then wrong":   nil, // a valid node first: its digest is kept, and must not admit the next
		"two, the first bad": {badID, good},
	} {
		t.Run(name, func(t *testing.T) {
			e := startNoTimers(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.Endpoints("c2", 1))
			ctx, cancel := context.WithTimeout(context.Background(), rawxds.Timeout)
			defer cancel()
			cs, err := e.Conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
				"/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources", grpc.ForceCodecV2(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			send := func(m proto.Message, nodes ...[]byte) {
				t.Helper()
				b, _ := proto.Marshal(m)
				for _, node := range nodes {
					b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), node)
				}
				if err := cs.SendMsg(b); err != nil {
					t.Fatal(err)
				}
			}
			recv := func() *discovery.DeltaDiscoveryResponse {
				t.Helper()
				var raw []byte
				if err := cs.RecvMsg(&raw); err != nil {
					t.Fatal(err)
				}
				var resp discovery.DeltaDiscoveryResponse
				if err := proto.Unmarshal(raw, &resp); err != nil {
					t.Fatal(err)
				}
				return &resp
			}
			send(dsub(eds, "c1"))
			resp := recv()
			if nodes == nil { // an ACK with a good node, then a subscription answered
				send(dack(resp), good)
				send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"c2"}})
				resp = recv()
				nodes = [][]byte{append(good[:len(good):len(good)], 0x0a, 0x01, 0xff)} // a second id, not UTF-8
			}
			send(dack(resp), nodes...)
			for {
				var raw []byte
				if err := cs.RecvMsg(&raw); err != nil {
					if status.Code(err) != codes.Internal {
						t.Fatalf("stream ended with %v, want Internal: a malformed request", err)
					}
					return
				}
			}
		})
	}
}
