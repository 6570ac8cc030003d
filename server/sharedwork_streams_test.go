package server_test

import (
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// Two streams make the same move from one shared list: the second, which
// takes the transition's items after the first has sent them, must send
// the same thing (nothing written into the shared items).
func TestSharedWorkTwoStreams(t *testing.T) {
	e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Cluster("c"))
	a, b := e.DeltaADS(t), e.DeltaADS(t)
	a.Send(dsub(cds, "*"))
	wantDelta(t, recvAck(a), cds, []string{"a", "b", "c"}, nil)
	b.Send(dsub(cds, "*"))
	rb := b.Recv() // not ACKed: b cannot take the change yet
	wantDelta(t, rb, cds, []string{"a", "b", "c"}, nil)
	publish(e, clusterV("a", 2), rawxds.Cluster("b"), rawxds.Cluster("c"))
	ra := recvAck(a)
	wantDelta(t, ra, cds, []string{"a"}, nil)
	b.Send(dack(rb))
	rb2 := recvAck(b)
	wantDelta(t, rb2, cds, []string{"a"}, nil)
	for _, r := range rb2.GetResources() {
		if len(r.GetAliases()) != 0 || r.GetVersion() != clusterV("a", 2).Version {
			t.Fatalf("second stream sent %v", r)
		}
	}
}

// A first request that subscribes to every endpoint set and unsubscribes
// one of them in the same breath gets the others only: the subscription is
// not taken for the snapshot's whole list of names.
func TestFirstSubscriptionWithUnsubscribe(t *testing.T) {
	e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
	s := e.DeltaADS(t)
	s.Send(dsub(cds, "*"))
	wantDelta(t, recvAck(s), cds, []string{"a", "b"}, nil)
	req := dsub(eds, "a", "b")
	req.ResourceNamesUnsubscribe = []string{"b"}
	s.Send(req)
	wantDelta(t, recvAck(s), eds, []string{"a"}, nil)
	s.ExpectNone()
}
