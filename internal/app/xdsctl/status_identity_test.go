package xdsctl

import (
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/app/daemon"
)

// TestPrintStatusIdentity: status shows each stream's certificate
// identity when some stream has one, and how the policy file's reads went.
func TestPrintStatusIdentity(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rep := &daemon.StatusReport{Ready: true, Streams: []daemon.StreamEntry{
		{ID: 1, NodeID: "web", Variant: "ads/sotw", Identity: "spiffe://example.org/ns/prod/sa/web",
			Types: []daemon.TypeEntry{{Type: "cds", State: "SYNCED"}}},
		{ID: 2, NodeID: "plain", Variant: "ads/delta", Types: []daemon.TypeEntry{{Type: "cds", State: "STALE"}}},
	}, Authz: &daemon.AuthzStatus{File: "/etc/xdsd/authz.yaml", Rules: 3, LoadedAt: at, ReloadsOK: 1, ReloadsFailed: 1,
		LastError: "allow[2].nodes (line 9): unknown field"}}
	var b strings.Builder
	if err := printStatus(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"IDENTITY", "spiffe://example.org/ns/prod/sa/web", "2 ads/delta   -",
		"Authorization policy /etc/xdsd/authz.yaml: 3 rules, read at 2026-01-02T03:04:05Z (1 rereads, 1 refused)",
		"allow[2].nodes (line 9): unknown field"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	rep.Streams, rep.Authz = rep.Streams[1:], nil
	b.Reset()
	if err := printStatus(&b, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "IDENTITY") || strings.Contains(b.String(), "Authorization") {
		t.Errorf("status without identities or policy:\n%s", b.String())
	}
}
