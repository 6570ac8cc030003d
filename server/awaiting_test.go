package server_test

import (
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// TestAwaitingReplies checks the count of responses awaiting their
// clients' replies: one per response sent, none once it is ACKed or NACKed
// or its stream ends, SotW and incremental.
func TestAwaitingReplies(t *testing.T) {
	e := start(t, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
	want := func(n int64) {
		t.Helper()
		waitFor(t, func() bool { return e.Server.AwaitingReplies() == n })
	}
	sotw := e.ADS(t)
	sotw.Send(req(cds))
	r := sotw.Recv()
	if got := e.Server.AwaitingReplies(); got != 1 {
		t.Fatalf("a response sent, not ACKed: %d awaiting, want 1", got)
	}
	sotw.Send(ack(r))
	want(0)
	publish(e, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Endpoints("a", 1))
	r = sotw.Recv()
	want(1)
	sotw.Send(nack(r, r.VersionInfo, "no"))
	want(0)

	delta := e.DeltaADS(t)
	delta.Send(dsub(eds, "a"))
	d := delta.Recv()
	want(1)
	delta.Send(dack(d))
	want(0)
	sotw.Send(req(eds, "a"))
	sotw.Recv()
	delta.Send(dsub(cds))
	delta.Recv()
	want(2)
	delta.Close()
	sotw.Close()
	want(0) // the streams ended with their responses unanswered
}

// TestStreamsOpened checks the count of streams opened: one per stream,
// cumulative, whatever the variant, and not lowered when streams close.
func TestStreamsOpened(t *testing.T) {
	e := start(t, rawxds.Cluster("a"))
	if got := e.Server.StreamsOpened(); got != 0 {
		t.Fatalf("%d streams opened before any client came, want 0", got)
	}
	opened := func(n uint64) {
		t.Helper()
		waitFor(t, func() bool { return e.Server.StreamsOpened() == n })
	}
	sotw := e.ADS(t)
	sotw.Send(req(cds))
	sotw.Recv()
	opened(1)
	delta := e.DeltaADS(t)
	delta.Send(dsub(cds))
	delta.Recv()
	opened(2)
	sotw.Close()
	delta.Close()
	waitFor(t, func() bool { return len(e.Server.Status()) == 0 })
	if got := e.Server.StreamsOpened(); got != 2 {
		t.Fatalf("%d streams opened after both closed, want 2", got)
	}
}
