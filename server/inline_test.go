package server_test

import (
	"testing"
	"time"

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
