package server_test

import (
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// TestControlPlane checks that responses carry the identifier the server
// is given, and the latest one after a change of it, in both variants.
func TestControlPlane(t *testing.T) {
	e := start(t, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
	e.Server.SetControlPlane("replica-1 revision 7")
	s := e.ADS(t)
	s.Send(req(cds))
	if id := s.Recv().GetControlPlane().GetIdentifier(); id != "replica-1 revision 7" {
		t.Fatalf("SotW response control_plane.identifier %q", id)
	}
	d := e.DeltaADS(t)
	d.Send(dsub(eds, "a"))
	r := recvAck(d)
	if id := r.GetControlPlane().GetIdentifier(); id != "replica-1 revision 7" {
		t.Fatalf("delta response control_plane.identifier %q", id)
	}
	e.Server.SetControlPlane("replica-1 revision 8")
	publish(e, rawxds.Cluster("a"), rawxds.Endpoints("a", 2))
	if id := recvAck(d).GetControlPlane().GetIdentifier(); id != "replica-1 revision 8" {
		t.Fatalf("after the change, control_plane.identifier %q", id)
	}
	e.Server.SetControlPlane("")
	publish(e, rawxds.Cluster("a"), rawxds.Endpoints("a", 3))
	if cp := recvAck(d).GetControlPlane(); cp != nil {
		t.Fatalf("with no identifier, control_plane %v", cp)
	}
}
