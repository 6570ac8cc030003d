package e2e_test

// Tests of the real xdsd binary: each starts `xdsd serve` as a subprocess
// on a temporary configuration directory, drives it through its ports and
// files, and stops it with SIGTERM, which must end it with status 0.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	xdsdaemon "github.com/xdsd/xdsd/internal/app/daemon"
	_ "github.com/xdsd/xdsd/internal/envoytypes" // every Envoy type, for Anys in JSON
	"github.com/xdsd/xdsd/internal/testutil/xdstest"
)

// The service every daemon test configures: a grpc-go client dialing
// xds:///svcTarget goes listener svcTarget -> route svcRoute -> cluster
// svcCluster -> the endpoints of svcCluster.
const (
	svcTarget  = "svc.daemon.example"
	svcRoute   = "route-svc"
	svcCluster = "backend"
	// endpointsFile is the file of svcCluster's endpoints, in a
	// subdirectory.
	endpointsFile = "endpoints/backend.yaml"
)

// Addresses for tests that serve endpoints nobody connects to.
const (
	dummyA = "127.0.0.1:10001"
	dummyB = "127.0.0.1:10002"
)

// ---------------------------------------------------------------------------
// grpc-go traffic through the configuration directory.

// TestDaemon_grpc_traffic: a grpc-go xDS client reaches backend A through
// the resources of the configuration directory; rewriting the endpoints
// file moves it to backend B, on the same ADS stream.
func TestDaemon_grpc_traffic(t *testing.T) {
	t.Parallel()
	addrA, _ := xdstest.StartBackend(t)
	addrB, _ := xdstest.StartBackend(t)
	cfg := newConfigDir(t)
	cfg.writeService(addrA)
	d := startReady(t, nil, serveArgs(cfg.dir)...)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// The first load counts every resource as changed.
	d.waitLogLine(ctx, t, "the first load's log line", `msg="configuration loaded"`, fmt.Sprintf(" changed=%d ", len(cfg.resources())))
	cc1 := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(d.xds, "node-1"))

	var streamID uint64
	if !t.Run("traffic_to_A", func(t *testing.T) {
		id, err := xdstest.CallBackend(ctx, cc1)
		if err != nil {
			t.Fatalf("first RPC: %v", err)
		}
		if id != addrA {
			t.Fatalf("first RPC answered by %q, want backend A %q", id, addrA)
		}
		callN(ctx, t, cc1, addrA, 3)
		st := d.waitSynced(ctx, t, "node-1", cfg.versions())
		streamID = st.ID
	}) {
		return
	}

	// PROTOCOL N1, our default: without rules every node sees every
	// resource.
	if !t.Run("N1_default_every_node", func(t *testing.T) {
		cc2 := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(d.xds, "node-2"))
		callN(ctx, t, cc2, addrA, 3)
		st1 := d.waitSynced(ctx, t, "node-1", cfg.versions())
		st2 := d.waitSynced(ctx, t, "node-2", cfg.versions())
		if st1.ID == st2.ID {
			t.Errorf("both nodes on stream %d", st1.ID)
		}
		dump1, dump2 := d.configDump(ctx, t, "node-1"), d.configDump(ctx, t, "node-2")
		dump3 := d.configDump(ctx, t, "a-node-that-never-connected")
		for _, dump := range []map[string][]*anypb.Any{dump1, dump2, dump3} {
			sameResourcesByType(t, "config_dump", dump, cfg.byType())
		}
	}) {
		return
	}

	t.Run("endpoints_file_edit_moves_traffic_to_B", func(t *testing.T) {
		cfg.write(endpointsFile, endpointsYAML(svcCluster, addrB))
		waitBackend(ctx, t, cc1, addrB)
		callN(ctx, t, cc1, addrB, 3)
		st := d.waitSynced(ctx, t, "node-1", cfg.versions())
		if st.ID != streamID {
			t.Errorf("node-1 is on stream %d, want still %d", st.ID, streamID)
		}
		if !d.logHas(`msg="configuration loaded"`, "files_read=1 ", " waited=", " load=") {
			t.Errorf("no \"configuration loaded\" log line with files_read=1 (only the endpoints file re-read), the wait and the load's time")
		}
	})
}

// ---------------------------------------------------------------------------
// Rejected configuration changes.

// TestDaemon_config_rejected makes invalid edits of every kind the loader
// rejects: each is refused as a whole, the last good configuration keeps
// serving, and /status, the log and /metrics tell why; the fix is taken.
func TestDaemon_config_rejected(t *testing.T) {
	t.Parallel()
	addrA, _ := xdstest.StartBackend(t)
	addrB, _ := xdstest.StartBackend(t)
	cfg := newConfigDir(t)
	cfg.writeService(addrA)
	d := startReady(t, nil, serveArgs(cfg.dir)...)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cc := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(d.xds, "node-r"))
	waitBackend(ctx, t, cc, addrA)
	d.waitSynced(ctx, t, "node-r", cfg.versions())
	good := cfg.byType()

	goodRoute := routeYAML(svcRoute, svcTarget, svcCluster)
	goodCluster := clusterYAML(svcCluster)
	goodEndpoints := endpointsYAML(svcCluster, addrA)
	for _, tc := range []struct {
		name   string
		file   string // the file the error must name
		reason string // and the reason
		edit   func()
		revert func()
	}{{
		name:   "route_to_missing_cluster",
		file:   "route.yaml",
		reason: `virtual_hosts[0].routes[0].route.cluster: route to cluster "nope", which does not exist`,
		edit:   func() { cfg.write("route.yaml", routeYAML(svcRoute, svcTarget, "nope")) },
		revert: func() { cfg.write("route.yaml", goodRoute) },
	}, {
		name:   "unknown_field",
		file:   "cluster.yaml",
		reason: `unknown field "no_such_field"`,
		edit:   func() { cfg.write("cluster.yaml", goodCluster+"  no_such_field: 1\n") },
		revert: func() { cfg.write("cluster.yaml", goodCluster) },
	}, {
		name:   "duplicate_name_across_files",
		file:   "extra/dup.yaml",
		reason: `cds "backend": duplicate name: also defined in cluster.yaml`,
		edit:   func() { cfg.write("extra/dup.yaml", clusterYAML(svcCluster)) },
		revert: func() { cfg.remove("extra/dup.yaml") },
	}, {
		name:   "eds_cluster_without_endpoints",
		file:   "orphan.yaml",
		reason: `EDS cluster has no endpoints resource (a ClusterLoadAssignment with cluster_name "orphan")`,
		edit:   func() { cfg.write("orphan.yaml", clusterYAML("orphan")) },
		revert: func() { cfg.remove("orphan.yaml") },
	}, {
		name:   "bad_yaml",
		file:   endpointsFile,
		reason: "invalid YAML: ",
		edit:   func() { cfg.write(endpointsFile, "resources: [\n  {\"@type\": oops\n") },
		revert: func() { cfg.write(endpointsFile, goodEndpoints) },
	}, {
		name:   "not_a_resource_type",
		file:   "secret.yaml",
		reason: `@type "type.googleapis.com/envoy.config.core.v3.Address" is not an xDS resource type`,
		edit: func() {
			cfg.write("secret.yaml", "\"@type\": type.googleapis.com/envoy.config.core.v3.Address\nsocket_address: {address: 127.0.0.1, port_value: 1}\n")
		},
		revert: func() { cfg.remove("secret.yaml") },
	}} {
		if !t.Run(tc.name, func(t *testing.T) {
			d.checkRejected(ctx, t, tc.edit, tc.file, tc.reason)
			// The last good configuration keeps serving.
			callN(ctx, t, cc, addrA, 3)
			sameResourcesByType(t, "config_dump", d.configDump(ctx, t, "node-r"), good)
			d.checkAccepted(ctx, t, tc.revert)
			callN(ctx, t, cc, addrA, 3)
		}) {
			return
		}
	}

	// All or nothing: while route.yaml is broken, a valid change to the
	// endpoints file is not applied either; the fix of route.yaml brings
	// both in.
	t.Run("all_or_nothing_then_fix", func(t *testing.T) {
		d.checkRejected(ctx, t, func() { cfg.write("route.yaml", routeYAML(svcRoute, svcTarget, "nope")) },
			"route.yaml", `route to cluster "nope"`)
		d.checkRejected(ctx, t, func() { cfg.write(endpointsFile, endpointsYAML(svcCluster, addrB)) },
			"route.yaml", `route to cluster "nope"`)
		callN(ctx, t, cc, addrA, 3)
		sameResourcesByType(t, "config_dump", d.configDump(ctx, t, "node-r"), good)

		d.checkAccepted(ctx, t, func() { cfg.write("route.yaml", goodRoute) })
		waitBackend(ctx, t, cc, addrB)
		callN(ctx, t, cc, addrB, 3)
		d.waitSynced(ctx, t, "node-r", cfg.versions())
		sameResourcesByType(t, "config_dump", d.configDump(ctx, t, "node-r"), cfg.byType())
	})
}

// checkRejected makes an edit that must be rejected and checks that
// /status, the log and /metrics report it, naming file and reason.
func (d *daemonProc) checkRejected(ctx context.Context, t *testing.T, edit func(), file, reason string) {
	t.Helper()
	before := d.status(ctx, t)
	failedBefore := d.metric(ctx, t, `xdsd_config_reloads_total{result="failed"}`)
	edit()
	st := d.waitStatus(ctx, t, "a failed reload", func(s xdsdaemon.StatusReport) bool {
		return s.Config.ReloadsFailed > before.Config.ReloadsFailed
	})
	if !st.Ready {
		t.Errorf("/status: ready = false after a rejected change, want true (the last good configuration serves)")
	}
	if st.Config.LastErrorAt == nil {
		t.Errorf("/status: config.last_error_at not set")
	}
	want := file + ": "
	if !strings.Contains(st.Config.LastError, want) || !strings.Contains(st.Config.LastError, reason) {
		t.Errorf("/status: config.last_error = %q, want it to name %q and %q", st.Config.LastError, file, reason)
	}
	d.waitLogLine(ctx, t, "the rejection", `level=ERROR`, `msg="configuration rejected; still serving the last good one"`,
		logEscape(want), logEscape(reason))
	if failed := d.metric(ctx, t, `xdsd_config_reloads_total{result="failed"}`); failed <= failedBefore {
		t.Errorf(`/metrics: xdsd_config_reloads_total{result="failed"} = %v, want more than %v`, failed, failedBefore)
	}
	if v := d.metric(ctx, t, "xdsd_config_loaded"); v != 1 {
		t.Errorf("/metrics: xdsd_config_loaded = %v, want 1", v)
	}
	if code, _ := d.get(ctx, t, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d after a rejected change, want 200", code)
	}
}

// checkAccepted makes an edit that must load and waits until it has.
func (d *daemonProc) checkAccepted(ctx context.Context, t *testing.T, edit func()) {
	t.Helper()
	before := d.status(ctx, t)
	okBefore := d.metric(ctx, t, `xdsd_config_reloads_total{result="ok"}`)
	edit()
	d.waitStatus(ctx, t, "a good reload clearing the error", func(s xdsdaemon.StatusReport) bool {
		return s.Config.ReloadsOK > before.Config.ReloadsOK && s.Config.LastError == ""
	})
	if ok := d.metric(ctx, t, `xdsd_config_reloads_total{result="ok"}`); ok <= okBefore {
		t.Errorf(`/metrics: xdsd_config_reloads_total{result="ok"} = %v, want more than %v`, ok, okBefore)
	}
}
