package xdsctl

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/testutil/golden"
)

// TestOutputGolden: what xdsctl prints for a status report with one of
// everything, and for an update event in YAML and in JSON, is the golden
// files' (-update rewrites them).
func TestOutputGolden(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	later := at.Add(90 * time.Second)
	rep := &daemon.StatusReport{
		Ready:  true,
		Config: daemon.ConfigStatus{ReloadsOK: 3, ReloadsFailed: 1, LastError: "configuration rejected: c.yaml: cds \"a\": unknown field \"nope\"", LastErrorAt: &later, LastLoadedAt: &at},
		Store:  &daemon.StoreStatus{Replica: "r1", Prefix: "/xdsd/", Revision: 42, Generation: "0", Reachable: true, Since: &at},
		Authz:  &daemon.AuthzStatus{File: "/etc/xdsd/authz.yaml", Rules: 2, LoadedAt: at, ReloadsOK: 1},
		Streams: []daemon.StreamEntry{
			{ID: 1, NodeID: "envoy-1", Cluster: "edge", Identity: "spiffe://example.org/node/envoy-1", Variant: "ads/delta", Connected: at,
				Types: []daemon.TypeEntry{
					{Type: "cds", State: "SYNCED", SentVersion: "6bf0f915603f8d17", AckedVersion: "6bf0f915603f8d17"},
					{Type: "eds", State: "NACKED", SentVersion: "992a564851583e00", AckedVersion: "15a7474cc56d1e77", NackVersion: "992a564851583e00", NackMessage: "port 0 rejected", NackedAt: &later},
				}},
			{ID: 2, NodeID: "grpc-1", Variant: "ads/sotw", Connected: later, Types: []daemon.TypeEntry{{Type: "lds", State: "NOT SENT"}}},
		},
	}
	var status bytes.Buffer
	if err := printStatus(&status, rep); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "status.golden"), status.String())

	e := event{Event: eventUpdate, Type: "cds", TypeURL: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Name: "a", Version: "6bf0f915603f8d17",
		Resource: &clusterv3.Cluster{Name: "a", ConnectTimeout: durationpb.New(1500 * time.Millisecond), LbPolicy: clusterv3.Cluster_RING_HASH}}
	for _, format := range []string{formatYAML, formatJSON} {
		var out bytes.Buffer
		p := &printer{w: &out, format: format}
		if err := p.print(e); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "event."+format+".golden"), out.String())
	}
}
