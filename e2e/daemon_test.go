package e2e_test

// Tests of the real xdsd binary: each starts `xdsd serve` as a subprocess
// on a temporary configuration directory, drives it through its ports and
// files, and stops it with SIGTERM, which must end it with status 0.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/fileout"
	xdsdaemon "github.com/xdsd/xdsd/internal/daemon"
	_ "github.com/xdsd/xdsd/internal/envoytypes" // every Envoy type, for Anys in JSON
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
	"github.com/xdsd/xdsd/internal/testutil/xdstest"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
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
// 1. grpc-go traffic through the configuration directory.

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
// 2. Rejected configuration changes.

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

// ---------------------------------------------------------------------------
// 3. Admin endpoints.

// TestDaemon_admin starts xdsd on a directory that does not load, checks
// it is live but not ready, fixes the directory, and checks /readyz,
// /status, /config_dump and /metrics with a grpc-go client connected.
func TestDaemon_admin(t *testing.T) {
	t.Parallel()
	started := time.Now()
	addrA, _ := xdstest.StartBackend(t)
	addrB, _ := xdstest.StartBackend(t)
	cfg := newConfigDir(t)
	cfg.writeService(addrA)
	cfg.write("route.yaml", routeYAML(svcRoute, svcTarget, "nope"))
	d := startDaemon(t, nil, serveArgs(cfg.dir)...)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	if !t.Run("not_ready_before_a_valid_config", func(t *testing.T) {
		st := d.waitStatus(ctx, t, "the failed first load", func(s xdsdaemon.StatusReport) bool {
			return s.Config.ReloadsFailed > 0
		})
		if st.Ready || st.Config.ReloadsOK != 0 || st.Config.LastLoadedAt != nil {
			t.Errorf("/status: ready %v, reloads_ok %d, last_loaded_at %v; want false, 0 and none",
				st.Ready, st.Config.ReloadsOK, st.Config.LastLoadedAt)
		}
		if !strings.Contains(st.Config.LastError, "route.yaml: ") || !strings.Contains(st.Config.LastError, `route to cluster "nope"`) {
			t.Errorf("/status: last_error = %q, want it to name route.yaml and the missing cluster", st.Config.LastError)
		}
		if code, body := d.get(ctx, t, "/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/healthz = %d %q, want 200 \"ok\\n\"", code, body)
		}
		if code, body := d.get(ctx, t, "/readyz"); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz = %d %q, want 503", code, body)
		}
		if v := d.metric(ctx, t, "xdsd_config_loaded"); v != 0 {
			t.Errorf("xdsd_config_loaded = %v, want 0", v)
		}
		if dump := d.configDump(ctx, t, "anyone"); len(dump) != 0 {
			t.Errorf("/config_dump before any configuration: %d types, want none", len(dump))
		}
	}) {
		return
	}

	if !t.Run("ready_after_the_fix", func(t *testing.T) {
		fixedAt := time.Now()
		cfg.write("route.yaml", routeYAML(svcRoute, svcTarget, svcCluster))
		d.waitReady(ctx, t)
		st := d.status(ctx, t)
		if !st.Ready || st.Config.LastError != "" || st.Config.ReloadsOK == 0 || st.Config.LastLoadedAt == nil ||
			st.Config.LastLoadedAt.After(time.Now()) || st.Config.LastLoadedAt.Before(fixedAt) {
			t.Errorf("/status config after the fix (written at %v): ready %v %+v, want ready, no error, loaded since",
				fixedAt, st.Ready, st.Config)
		}
	}) {
		return
	}

	cc := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(d.xds, "admin-node"))
	waitBackend(ctx, t, cc, addrA)

	t.Run("status", func(t *testing.T) {
		st := d.waitSynced(ctx, t, "admin-node", cfg.versions())
		if st.Variant != "ads/sotw" || st.Connected.IsZero() {
			t.Errorf("stream: variant %q connected %v, want ads/sotw and a time", st.Variant, st.Connected)
		}
		for _, ty := range st.Types {
			if ty.State != "SYNCED" || ty.NackVersion != "" {
				t.Errorf("stream type %+v, want SYNCED and never NACKed", ty)
			}
		}
	})

	t.Run("config_dump", func(t *testing.T) {
		dump := d.configDump(ctx, t, "admin-node")
		sameResourcesByType(t, "config_dump", dump, cfg.byType())
	})

	t.Run("metrics", func(t *testing.T) {
		// A change pushed to the client is timed from its publication.
		before := d.status(ctx, t).Config.ReloadsOK
		cfg.write(endpointsFile, endpointsYAML(svcCluster, addrA, addrB))
		d.waitSynced(ctx, t, "admin-node", cfg.versions())
		// The daemon counts a load after publishing it: the client may
		// have it first.
		d.waitStatus(ctx, t, "the change counted", func(s xdsdaemon.StatusReport) bool { return s.Config.ReloadsOK > before })
		code, body := d.get(ctx, t, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics = %d", code)
		}
		for series, check := range map[string]func(float64) bool{
			`xdsd_streams{variant="ads/sotw"}`:                 func(v float64) bool { return v == 1 },
			`xdsd_stream_types{variant="ads/sotw",type="eds"}`: func(v float64) bool { return v == 1 },
			`xdsd_push_latency_seconds_count`:                  func(v float64) bool { return v >= 1 },
			`xdsd_push_latency_seconds_bucket{le="+Inf"}`:      func(v float64) bool { return v >= 1 },
			`xdsd_push_latency_seconds_sum`:                    func(v float64) bool { return v > 0 },
			`xdsd_responses_total`:                             func(v float64) bool { return v >= 5 },
			`xdsd_acks_total{type="eds"}`:                      func(v float64) bool { return v >= 2 },
			`xdsd_nacks_total{type="lds"}`:                     func(v float64) bool { return v == 0 },
			`xdsd_config_reloads_total{result="ok"}`:           func(v float64) bool { return v >= 2 },
			`xdsd_config_reloads_total{result="failed"}`:       func(v float64) bool { return v >= 1 },
			`xdsd_config_loaded`:                               func(v float64) bool { return v == 1 },
			// The fix and this change at least (the first load failed),
			// each after waiting Debounce for its events to end.
			`xdsd_config_load_seconds_count`:             func(v float64) bool { return v >= 2 },
			`xdsd_config_load_seconds_sum`:               func(v float64) bool { return v >= 2*configdir.Debounce.Seconds() },
			`xdsd_config_load_seconds_bucket{le="+Inf"}`: func(v float64) bool { return v >= 2 },
			`xdsd_config_publish_seconds_count`:          func(v float64) bool { return v >= 2 },
			`xdsd_config_last_loaded_timestamp_seconds`: func(v float64) bool {
				return v >= float64(started.UnixMilli())/1e3-0.001 && v <= float64(time.Now().Unix()+1)
			},
		} {
			v, ok := metricValue(body, series)
			if !ok || !check(v) {
				t.Errorf("/metrics %s = %v (present %v)", series, v, ok)
			}
		}
		for _, s := range []string{"# TYPE xdsd_streams gauge", "# TYPE xdsd_push_latency_seconds histogram",
			"# TYPE xdsd_config_load_seconds histogram", "# TYPE xdsd_config_publish_seconds histogram"} {
			if !strings.Contains(body, s+"\n") {
				t.Errorf("/metrics has no line %q", s)
			}
		}
		if t.Failed() {
			t.Logf("/metrics:\n%s", body)
		}
	})

	t.Run("pprof", func(t *testing.T) {
		if code, body := d.get(ctx, t, "/debug/pprof/cmdline"); code != http.StatusOK || !strings.Contains(body, "serve") {
			t.Errorf("/debug/pprof/cmdline = %d %q", code, body)
		}
		if code, _ := d.get(ctx, t, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK {
			t.Errorf("/debug/pprof/goroutine = %d", code)
		}
	})
}

// TestDaemon_clients_before_first_load connects clients while the
// configuration directory does not load yet, as Envoys reconnecting to a
// restarted xdsd do: a grpc-go xDS client, a raw ADS stream and a REST poll.
// Once the directory is fixed, each must get the configuration.
func TestDaemon_clients_before_first_load(t *testing.T) {
	t.Parallel()
	addrA, _ := xdstest.StartBackend(t)
	cfg := newConfigDir(t)
	cfg.writeService(addrA)
	cfg.write("route.yaml", routeYAML(svcRoute, svcTarget, "nope"))
	d := startDaemon(t, nil, serveArgs(cfg.dir)...)
	// Bounded more tightly than waitTimeout: the answers come within
	// milliseconds of the fix, or never.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.waitStatus(ctx, t, "the failed first load", func(s xdsdaemon.StatusReport) bool { return s.Config.ReloadsFailed > 0 })

	// grpc-go opens its ADS stream when the channel leaves idle.
	cc := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(d.xds, "early-grpc"))
	cc.Connect()
	type result struct {
		resp *discovery.DiscoveryResponse
		err  error
	}
	raw := make(chan result, 1)
	go func() {
		resp, err := fetchClustersAs(ctx, d.xds, insecure.NewCredentials(), "early-raw")
		raw <- result{resp, err}
	}()
	d.waitStatus(ctx, t, "the early ADS streams", func(s xdsdaemon.StatusReport) bool {
		n := 0
		for _, st := range s.Streams {
			if st.NodeID == "early-grpc" || st.NodeID == "early-raw" {
				n++
			}
		}
		return n == 2
	})
	type restResult struct {
		code int
		body []byte
		err  error
	}
	rest := make(chan restResult, 1)
	wrote := make(chan struct{})
	go func() {
		code, body, _, err := restPost(ctx, "http://"+d.rest+"/v3/discovery:clusters", discoveryRequest(t, &corev3.Node{Id: "early-rest"}, cds, ""), wrote)
		rest <- restResult{code, body, err}
	}()
	select {
	case <-wrote:
	case <-ctx.Done():
		t.Fatal("REST poll not sent")
	}

	cfg.write("route.yaml", routeYAML(svcRoute, svcTarget, svcCluster))
	d.waitReady(ctx, t)

	t.Run("grpc_go", func(t *testing.T) {
		waitBackend(ctx, t, cc, addrA)
	})
	t.Run("raw_ADS", func(t *testing.T) {
		select {
		case r := <-raw:
			if r.err != nil {
				t.Fatalf("ADS stream opened before the first load: %v", r.err)
			}
			sameResources(t, "clusters", r.resp.GetResources(), cfg.byType()[cds])
		case <-ctx.Done():
			t.Fatal("ADS stream opened before the first load: no clusters after it")
		}
	})
	t.Run("REST", func(t *testing.T) {
		select {
		case r := <-rest:
			if r.err != nil || r.code != http.StatusOK {
				t.Fatalf("REST poll sent before the first load: %d %v %s", r.code, r.err, r.body)
			}
			sameResources(t, "clusters", parseResponse(t, r.body).GetResources(), cfg.byType()[cds])
		case <-ctx.Done():
			t.Fatal("REST poll sent before the first load: no answer after it")
		}
	})
	if t.Failed() {
		t.Logf("/status: %+v", d.status(context.Background(), t))
	}
}

// ---------------------------------------------------------------------------
// 4. REST-JSON polling (PROTOCOL T4).

// restPollTimeout is the --rest-poll-timeout of TestDaemon_T4_REST: long
// enough for an edit to be picked up well within it, short enough to wait
// out for a 304.
const restPollTimeout = 3 * time.Second

// TestDaemon_T4_REST polls clusters over REST-JSON: canonical JSON
// answers, a request at the current version held until a file edit, and
// 304 Not Modified when nothing it covers changed.
func TestDaemon_T4_REST(t *testing.T) {
	t.Parallel()
	cfg := newConfigDir(t)
	cfg.writeService(dummyA)
	d := startReady(t, nil, serveArgs(cfg.dir, "--rest-poll-timeout", restPollTimeout.String())...)
	if d.rest == "" {
		t.Fatal("no REST address in the serving log line")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	node := &corev3.Node{Id: "rest-node"}
	url := func(typ string) string { return "http://" + d.rest + "/v3/discovery:" + typ }

	var clusterVersion, listenerVersion string
	if !t.Run("canonical_json", func(t *testing.T) {
		code, body, hdr, err := restPost(ctx, url("clusters"), discoveryRequest(t, node, cds, ""), nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("POST clusters: %d %v %s", code, err, body)
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q, want application/json", ct)
		}
		// Canonical proto3 JSON: lowerCamelCase names, Any with "@type".
		var raw map[string]any
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Fatalf("answer is not JSON: %v\n%s", err, body)
		}
		for _, k := range []string{"versionInfo", "typeUrl", "resources"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("answer has no %q: %s", k, body)
			}
		}
		if bytes.Contains(body, []byte(`"version_info"`)) || bytes.Contains(body, []byte(`"eds_cluster_config"`)) {
			t.Errorf("answer has snake_case field names, want proto3 JSON names: %s", body)
		}
		if rs, _ := raw["resources"].([]any); len(rs) != 1 || rs[0].(map[string]any)["@type"] != cds {
			t.Errorf("answer resources = %v, want one with \"@type\" %q", raw["resources"], cds)
		}
		resp := parseResponse(t, body)
		if resp.TypeUrl != cds {
			t.Errorf("type_url = %q, want %q", resp.TypeUrl, cds)
		}
		want := cfg.byType()[cds]
		sameResources(t, "REST clusters", resp.Resources, want)
		if v := setVersion(want...); resp.VersionInfo != v {
			t.Errorf("version_info = %q, want %q", resp.VersionInfo, v)
		}
		clusterVersion = resp.VersionInfo

		code, body, _, err = restPost(ctx, url("listeners"), discoveryRequest(t, node, "", ""), nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("POST listeners: %d %v %s", code, err, body)
		}
		lresp := parseResponse(t, body)
		sameResources(t, "REST listeners", lresp.Resources, cfg.byType()[lds])
		listenerVersion = lresp.VersionInfo
	}) {
		return
	}

	t.Run("bad_requests", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, body string
			want               int
		}{
			{http.MethodPost, "/v3/discovery:no-such-type", "{}", http.StatusNotFound},
			{http.MethodGet, "/v3/discovery:clusters", "", http.StatusMethodNotAllowed},
			{http.MethodPost, "/v3/discovery:clusters", "{not json", http.StatusBadRequest},
			{http.MethodPost, "/v3/discovery:clusters", `{"typeUrl": "` + lds + `"}`, http.StatusBadRequest},
		} {
			req, err := http.NewRequestWithContext(ctx, tc.method, "http://"+d.rest+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s %q = %d %q, want %d", tc.method, tc.path, tc.body, resp.StatusCode, b, tc.want)
			}
		}
	})

	t.Run("poll_held_until_file_edit", func(t *testing.T) {
		type answer struct {
			code int
			body []byte
			err  error
			took time.Duration
		}
		poll := func(typ, urlType, version string, wrote chan struct{}) <-chan answer {
			ch := make(chan answer, 1)
			body := discoveryRequest(t, node, typ, version)
			go func() {
				start := time.Now()
				code, b, _, err := restPost(ctx, url(urlType), body, wrote)
				ch <- answer{code, b, err, time.Since(start)}
			}()
			return ch
		}
		// Both polls are at the current version. The edit adds a
		// cluster: the clusters poll is answered with it, the listeners
		// poll is not (its resources did not change) and ends in 304.
		cWrote, lWrote := make(chan struct{}), make(chan struct{})
		clusters := poll(cds, "clusters", clusterVersion, cWrote)
		listeners := poll(lds, "listeners", listenerVersion, lWrote)
		for _, ch := range []chan struct{}{cWrote, lWrote} {
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatal("polls not sent")
			}
		}
		cfg.write("cluster2.yaml", clusterYAML("backend2")+endpointsItemYAML("backend2", dummyB))

		var a answer
		select {
		case a = <-clusters:
		case <-ctx.Done():
			t.Fatal("no answer to the held clusters poll")
		}
		if a.err != nil || a.code != http.StatusOK {
			t.Fatalf("held clusters poll: %d %v %s after %v, want 200 with the new cluster", a.code, a.err, a.body, a.took)
		}
		if a.took >= restPollTimeout {
			t.Errorf("held clusters poll answered after %v, want before the poll timeout %v", a.took, restPollTimeout)
		}
		resp := parseResponse(t, a.body)
		want := cfg.byType()[cds]
		sameResources(t, "clusters after the edit", resp.Resources, want)
		if v := setVersion(want...); resp.VersionInfo != v || v == clusterVersion {
			t.Errorf("version_info = %q, want %q (and not the old %q)", resp.VersionInfo, v, clusterVersion)
		}
		t.Logf("held clusters poll answered after %v", a.took)

		select {
		case a = <-listeners:
		case <-ctx.Done():
			t.Fatal("no answer to the held listeners poll")
		}
		if a.err != nil || a.code != http.StatusNotModified || len(a.body) != 0 {
			t.Errorf("listeners poll at the current version: %d %v %q after %v, want 304 Not Modified, empty", a.code, a.err, a.body, a.took)
		}
		if a.took < restPollTimeout {
			t.Errorf("listeners poll at the current version answered after %v, want it held for the poll timeout %v", a.took, restPollTimeout)
		}
	})
}

// discoveryRequest returns a DiscoveryRequest in canonical JSON.
func discoveryRequest(t *testing.T, node *corev3.Node, typeURL, version string) string {
	t.Helper()
	b, err := protojson.Marshal(&discovery.DiscoveryRequest{Node: node, TypeUrl: typeURL, VersionInfo: version})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// restPost POSTs body to url; wrote, if not nil, is closed once the
// request is written.
func restPost(ctx context.Context, url, body string, wrote chan struct{}) (int, []byte, http.Header, error) {
	if wrote != nil {
		var once sync.Once
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) },
		})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

func parseResponse(t *testing.T, body []byte) *discovery.DiscoveryResponse {
	t.Helper()
	var resp discovery.DiscoveryResponse
	if err := protojson.Unmarshal(body, &resp); err != nil {
		t.Fatalf("answer is not a DiscoveryResponse: %v\n%s", err, body)
	}
	return &resp
}

// ---------------------------------------------------------------------------
// 5. Files for Envoy's filesystem subscriptions (PROTOCOL T5).

// TestDaemon_T5_write_dir runs xdsd with --write-dir in YAML and in JSON:
// a file per type appears holding the configuration's resources, and an
// edit of the configuration rewrites only the files whose content changes.
func TestDaemon_T5_write_dir(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"yaml", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			enc, err := fileout.ParseEncoding(format)
			if err != nil {
				t.Fatal(err)
			}
			cfg := newConfigDir(t)
			cfg.writeService(dummyA)
			out := filepath.Join(t.TempDir(), "out") // created by xdsd
			d := startReady(t, nil, serveArgs(cfg.dir, "--write-dir", out, "--write-format", format, "--write-node", "files-node")...)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			const wroteMsg = `msg="wrote files for filesystem subscriptions"`
			path := func(ty *resource.Type) string { return filepath.Join(out, ty.Short+enc.Ext()) }

			d.waitLogLine(ctx, t, "the files written", wroteMsg)
			checkFiles(t, out, enc, cfg.byType())
			cdsBefore, err := os.Stat(path(resource.Lookup(cds)))
			if err != nil {
				t.Fatal(err)
			}

			cfg.write(endpointsFile, endpointsYAML(svcCluster, dummyB))
			eventually(ctx, t, "a second "+wroteMsg+" log line", func() (bool, string) {
				n := d.countLogLines(wroteMsg)
				return n >= 2, fmt.Sprintf("%d lines", n)
			})
			checkFiles(t, out, enc, cfg.byType())
			// Only the endpoints file was replaced.
			line := d.lastLogLine(wroteMsg)
			for _, ty := range fileout.Types() {
				named := strings.Contains(line, string(filepath.Separator)+ty.Short+enc.Ext())
				if named != (ty.URL == eds) {
					t.Errorf("log line %q: names %s: %v, want only eds", line, filepath.Base(path(ty)), named)
				}
			}
			cdsAfter, err := os.Stat(path(resource.Lookup(cds)))
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(cdsBefore, cdsAfter) || !cdsBefore.ModTime().Equal(cdsAfter.ModTime()) {
				t.Errorf("%s was replaced though its content did not change", cdsAfter.Name())
			}

			// The files are a configuration directory too: the same
			// resources, as another xdsd (or xdsctl validate) reads them.
			res, err := configdir.NewLoader(out).Load()
			if err != nil {
				t.Fatalf("the written files as a configuration directory: %v", err)
			}
			got := map[string][]*resource.Resource{}
			for _, r := range res.Resources {
				got[r.Type.URL] = append(got[r.Type.URL], r)
			}
			for url, rs := range cfg.byType() {
				if setVersion(got[url]...) != setVersion(rs...) {
					t.Errorf("%s read back from %s: %s, want %s", url, out, setVersion(got[url]...), setVersion(rs...))
				}
			}
		})
	}
}

// checkFiles checks that dir holds exactly one file per type of
// fileout.Types, no temporary file, and that each parses back into the
// resources of want for its type.
func checkFiles(t *testing.T, dir string, enc fileout.Encoding, want map[string][]*resource.Resource) {
	t.Helper()
	var wantNames, names []string
	for _, ty := range fileout.Types() {
		wantNames = append(wantNames, ty.Short+enc.Ext())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Errorf("%s holds %v, want %v", dir, names, wantNames)
	}
	for _, ty := range fileout.Types() {
		p := filepath.Join(dir, ty.Short+enc.Ext())
		resp, err := fileout.ReadResponse(p)
		if err != nil {
			t.Errorf("ReadResponse: %v", err)
			continue
		}
		if resp.TypeUrl != ty.URL {
			t.Errorf("%s: type_url %q, want %q", p, resp.TypeUrl, ty.URL)
		}
		sameResources(t, filepath.Base(p), resp.Resources, want[ty.URL])
		if v := setVersion(want[ty.URL]...); resp.VersionInfo != v {
			t.Errorf("%s: version_info %q, want %q", p, resp.VersionInfo, v)
		}
	}
}

// ---------------------------------------------------------------------------
// 6. TLS and mutual TLS on the xDS port.

// TestDaemon_TLS serves xDS over TLS (--tls-cert, --tls-key) and mutual
// TLS (and --client-ca), and checks which raw ADS clients get clusters.
func TestDaemon_TLS(t *testing.T) {
	t.Parallel()
	serverCA := testcerts.NewCA(t, "xdsd e2e server CA")
	otherCA := testcerts.NewCA(t, "some other CA")
	clientCA := testcerts.NewCA(t, "xdsd e2e client CA")
	certDir := t.TempDir()
	serverCert := serverCA.Issue(t, "xdsd", true)
	certFile, keyFile, caFile := filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"), filepath.Join(certDir, "client-ca.crt")
	writeFile(t, certFile, serverCert.CertPEM)
	writeFile(t, keyFile, serverCert.KeyPEM)
	writeFile(t, caFile, clientCA.CertPEM)
	clientCert := clientCA.Issue(t, "a client", false).TLSCertificate(t)
	strangerCert := otherCA.Issue(t, "a stranger", false).TLSCertificate(t)

	tlsCreds := func(roots *x509.CertPool, certs ...tls.Certificate) credentials.TransportCredentials {
		return credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: certs})
	}
	type client struct {
		name  string
		creds credentials.TransportCredentials
		ok    bool
	}
	for _, tc := range []struct {
		name    string
		args    []string
		clients []client
	}{{
		name: "TLS",
		args: []string{"--tls-cert", certFile, "--tls-key", keyFile},
		clients: []client{
			{"right_root", tlsCreds(serverCA.Pool()), true},
			{"wrong_root", tlsCreds(otherCA.Pool()), false},
			{"plaintext", insecure.NewCredentials(), false},
		},
	}, {
		name: "mTLS",
		args: []string{"--tls-cert", certFile, "--tls-key", keyFile, "--client-ca", caFile},
		clients: []client{
			{"right_root_and_client_cert", tlsCreds(serverCA.Pool(), clientCert), true},
			{"no_client_cert", tlsCreds(serverCA.Pool()), false},
			{"client_cert_of_another_CA", tlsCreds(serverCA.Pool(), strangerCert), false},
			{"wrong_root", tlsCreds(otherCA.Pool(), clientCert), false},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := newConfigDir(t)
			cfg.writeService(dummyA)
			d := startReady(t, nil, serveArgs(cfg.dir, tc.args...)...)
			for _, c := range tc.clients {
				t.Run(c.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
					defer cancel()
					resp, err := fetchClusters(ctx, d.xds, c.creds)
					switch {
					case c.ok && err != nil:
						t.Fatalf("fetching clusters: %v", err)
					case c.ok:
						sameResources(t, "clusters over "+tc.name, resp.GetResources(), cfg.byType()[cds])
					case err == nil:
						t.Fatalf("fetched clusters, want the connection refused")
					case status.Code(err) != codes.Unavailable:
						t.Errorf("error %v, want code Unavailable", err)
					default:
						t.Logf("refused as expected: %v", err)
					}
				})
			}
		})
	}
}

// fetchClusters opens an ADS stream to addr with creds and returns the
// first clusters response.
func fetchClusters(ctx context.Context, addr string, creds credentials.TransportCredentials) (*discovery.DiscoveryResponse, error) {
	return fetchClustersAs(ctx, addr, creds, "raw-ads")
}

// fetchClustersAs is fetchClusters for the node id node.
func fetchClustersAs(ctx context.Context, addr string, creds credentials.TransportCredentials, node string) (*discovery.DiscoveryResponse, error) {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: cds}); err != nil {
		_, err = stream.Recv() // the stream's status
		return nil, err
	}
	return stream.Recv()
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------------
// 7. The command line.

// TestDaemon_CLI checks xdsd's commands, flags and XDSD_* variables.
func TestDaemon_CLI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	t.Run("version", func(t *testing.T) {
		code, stdout, stderr := runXDSD(ctx, t, nil, "version")
		if code != 0 || stdout != "xdsd "+testVersion+"\n" {
			t.Errorf("xdsd version: status %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, "xdsd "+testVersion+"\n")
		}
	})

	t.Run("serve_help", func(t *testing.T) {
		code, stdout, stderr := runXDSD(ctx, t, nil, "serve", "--help")
		if code != 0 {
			t.Errorf("xdsd serve --help: status %d, want 0", code)
		}
		help := stdout + stderr
		for _, flag := range []string{"config-dir", "xds-addr", "admin-addr", "rest-addr", "rest-poll-timeout",
			"write-dir", "write-format", "write-node", "tls-cert", "tls-key", "client-ca", "log-level",
			"log-format", "shutdown-grace"} {
			if !strings.Contains(help, "  -"+flag+" ") && !strings.Contains(help, "  -"+flag+"\n") {
				t.Errorf("xdsd serve --help does not list -%s", flag)
			}
		}
		if !strings.Contains(help, "XDSD_CONFIG_DIR") {
			t.Errorf("xdsd serve --help does not mention XDSD_CONFIG_DIR")
		}
		if t.Failed() {
			t.Logf("help:\n%s", help)
		}
	})

	for _, tc := range []struct {
		name       string
		env        []string
		args       []string
		wantStderr string
	}{
		{"unknown_flag", nil, []string{"serve", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{"unknown_command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"no_command", nil, nil, "Usage:"},
		{"extra_argument", nil, []string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "", "stray"}, "unexpected arguments"},
		{"bad_env_value", []string{"XDSD_REST_POLL_TIMEOUT=soon"}, []string{"serve"}, "XDSD_REST_POLL_TIMEOUT"},
		{"bad_log_level", nil, []string{"serve", "--log-level", "loud"}, "--log-level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runXDSD(ctx, t, tc.env, tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("xdsd %q: status %d, stdout %q, stderr %q; want non-zero and %q", tc.args, code, stdout, stderr, tc.wantStderr)
			}
		})
	}

	// XDSD_XDS_ADDR and XDSD_CONFIG_DIR stand in for their flags; a flag
	// given on the command line wins over its variable.
	t.Run("env_XDSD_XDS_ADDR", func(t *testing.T) {
		cfg := newConfigDir(t)
		cfg.writeService(dummyA)
		d := startReady(t, []string{
			"XDSD_XDS_ADDR=127.0.0.1:0",
			"XDSD_CONFIG_DIR=" + cfg.dir,
			"XDSD_ADMIN_ADDR=not-an-address", // overridden by --admin-addr
		}, "serve", "--admin-addr", "127.0.0.1:0")
		if host, _, err := net.SplitHostPort(d.xds); err != nil || host != "127.0.0.1" {
			t.Errorf("xDS address %q, want 127.0.0.1:<port> from XDSD_XDS_ADDR", d.xds)
		}
		resp, err := fetchClusters(ctx, d.xds, insecure.NewCredentials())
		if err != nil {
			t.Fatalf("fetching clusters: %v", err)
		}
		sameResources(t, "clusters", resp.GetResources(), cfg.byType()[cds])
		if code, _ := d.get(ctx, t, "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz = %d, want 200", code)
		}
	})
}

// runXDSD runs the xdsd binary to its end.
func runXDSD(ctx context.Context, t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, xdsdBinary(t), args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		code = exit.ExitCode()
	default:
		t.Fatalf("xdsd %q: %v\nstderr: %s", args, err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// ---------------------------------------------------------------------------
// The xdsd process.

// daemonProc is a running `xdsd serve`.
type daemonProc struct {
	cmd  *exec.Cmd
	log  *logBuffer // stdout and stderr
	xds  string     // bound addresses, from the "xdsd serving" log line
	adm  string
	rest string

	exited   chan struct{} // closed when the process has ended
	exitErr  error         // cmd.Wait's, set before exited is closed
	stopOnce sync.Once
}

// serveArgs returns the arguments of `xdsd serve` on dir, on loopback
// ports chosen by the kernel, with extra appended.
func serveArgs(dir string, extra ...string) []string {
	return append([]string{"serve", "--config-dir", dir,
		"--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--rest-addr", "127.0.0.1:0"}, extra...)
}

var servingLine = regexp.MustCompile(`msg="xdsd serving" xds=(\S+) admin=(\S+) rest=(\S+)`)

// startDaemon starts xdsd with args and the extra environment env, and
// waits for it to log the addresses it serves on. It is stopped with
// SIGTERM when the test ends (after the test's later cleanups, such as
// its ClientConns), and must then exit with status 0; its log is printed
// if the test failed.
func startDaemon(t *testing.T, env []string, args ...string) *daemonProc {
	t.Helper()
	d := &daemonProc{log: newLogBuffer(), exited: make(chan struct{})}
	d.cmd = exec.Command(xdsdBinary(t), args...)
	d.cmd.Env = append(cleanEnv(), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting xdsd: %v", err)
	}
	go func() {
		d.exitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("xdsd %q log (last %d lines):\n%s", args, maxDaemonLogLines, lastLines(d.log.String(), maxDaemonLogLines))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	m := d.waitLog(ctx, t, `the "xdsd serving" log line`, func(log string) []string { return servingLine.FindStringSubmatch(log) })
	d.xds, d.adm, d.rest = unquote(m[1]), unquote(m[2]), unquote(m[3])
	return d
}

// startReady is startDaemon for a valid configuration directory: it also
// waits until xdsd has loaded it (/readyz), so that clients connect to a
// daemon that has a configuration. (Clients that connect before the first
// load are TestDaemon_clients_before_first_load's business.)
func startReady(t *testing.T, env []string, args ...string) *daemonProc {
	t.Helper()
	d := startDaemon(t, env, args...)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	d.waitReady(ctx, t)
	return d
}

// waitReady polls /readyz until it answers 200.
func (d *daemonProc) waitReady(ctx context.Context, t *testing.T) {
	t.Helper()
	eventually(ctx, t, "/readyz 200", func() (bool, string) {
		code, body := d.get(ctx, t, "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
	})
}

// maxDaemonLogLines bounds the log printed for a failed test.
const maxDaemonLogLines = 80

// stop sends SIGTERM and waits for the process to end; it must end with
// status 0, within the time a graceful shutdown with no open streams takes.
func (d *daemonProc) stop(t *testing.T) {
	t.Helper()
	d.stopOnce.Do(func() {
		select {
		case <-d.exited:
			t.Errorf("xdsd ended before SIGTERM: %v", d.exitErr)
			return
		default:
		}
		start := time.Now()
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("SIGTERM: %v", err)
		}
		const limit = 5 * time.Second
		timer := time.NewTimer(2 * limit)
		defer timer.Stop()
		select {
		case <-d.exited:
		case <-timer.C:
			t.Errorf("xdsd still running %v after SIGTERM; killing it", 2*limit)
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		took := time.Since(start)
		if d.exitErr != nil {
			t.Errorf("xdsd ended with %v after SIGTERM, want status 0", d.exitErr)
		}
		if took > limit {
			t.Errorf("xdsd took %v to end after SIGTERM, want less than %v", took, limit)
		}
		if !strings.Contains(d.log.String(), `msg="xdsd shutting down"`) {
			t.Errorf(`xdsd did not log "xdsd shutting down"`)
		}
		if strings.Contains(d.log.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector found a data race in xdsd")
		}
	})
}

// waitLog waits until match finds something in the whole log and returns
// it; it fails t if the process ends or ctx is done first.
func (d *daemonProc) waitLog(ctx context.Context, t *testing.T, what string, match func(string) []string) []string {
	t.Helper()
	for {
		log, changed := d.log.snapshot()
		if m := match(log); m != nil {
			return m
		}
		select {
		case <-changed:
		case <-d.exited:
			if m := match(d.log.String()); m != nil {
				return m
			}
			t.Fatalf("waiting for %s: xdsd ended: %v", what, d.exitErr)
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// waitLogLine waits for a log line holding every one of parts.
func (d *daemonProc) waitLogLine(ctx context.Context, t *testing.T, what string, parts ...string) string {
	t.Helper()
	return d.waitLog(ctx, t, fmt.Sprintf("a log line for %s with %q", what, parts), func(log string) []string {
		for _, line := range strings.Split(log, "\n") {
			if containsAll(line, parts) {
				return []string{line}
			}
		}
		return nil
	})[0]
}

// logHas reports whether a log line holds every one of parts.
func (d *daemonProc) logHas(parts ...string) bool { return d.lastLogLine(parts...) != "" }

// lastLogLine returns the last log line holding every one of parts.
func (d *daemonProc) lastLogLine(parts ...string) string {
	lines := strings.Split(d.log.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if containsAll(lines[i], parts) {
			return lines[i]
		}
	}
	return ""
}

// countLogLines counts the log lines holding every one of parts.
func (d *daemonProc) countLogLines(parts ...string) int {
	n := 0
	for _, line := range strings.Split(d.log.String(), "\n") {
		if containsAll(line, parts) {
			n++
		}
	}
	return n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// logEscape returns s as it appears inside a quoted value of a text log.
func logEscape(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// unquote undoes the quoting of a text log value.
func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// cleanEnv returns the environment without XDSD_* variables, so that the
// developer's own do not change the tests.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "XDSD_") {
			env = append(env, kv)
		}
	}
	return env
}

// logBuffer collects a process's output; snapshot tells when it grows.
type logBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{})} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

func (l *logBuffer) String() string {
	s, _ := l.snapshot()
	return s
}

func (l *logBuffer) snapshot() (string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.changed
}

// ---------------------------------------------------------------------------
// Admin HTTP.

// httpClient keeps no idle connections, which would outlive the tests.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// get GETs path from the admin port.
func (d *daemonProc) get(ctx context.Context, t *testing.T, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.adm+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// status returns /status.
func (d *daemonProc) status(ctx context.Context, t *testing.T) xdsdaemon.StatusReport {
	t.Helper()
	code, body := d.get(ctx, t, "/status")
	var st xdsdaemon.StatusReport
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	return st
}

// waitStatus polls /status until cond holds.
func (d *daemonProc) waitStatus(ctx context.Context, t *testing.T, what string, cond func(xdsdaemon.StatusReport) bool) xdsdaemon.StatusReport {
	t.Helper()
	var st xdsdaemon.StatusReport
	eventually(ctx, t, what+" in /status", func() (bool, string) {
		st = d.status(ctx, t)
		b, _ := json.Marshal(st)
		return cond(st), string(b)
	})
	return st
}

// waitSynced waits until /status shows one ADS SotW stream of node on
// which each type of want has been sent at that version and ACKed.
func (d *daemonProc) waitSynced(ctx context.Context, t *testing.T, node string, want map[string]string) xdsdaemon.StreamEntry {
	t.Helper()
	var found xdsdaemon.StreamEntry
	d.waitStatus(ctx, t, fmt.Sprintf("node %q SYNCED at %v", node, want), func(s xdsdaemon.StatusReport) bool {
		var streams []xdsdaemon.StreamEntry
		for _, st := range s.Streams {
			if st.NodeID == node && st.Variant == "ads/sotw" {
				streams = append(streams, st)
			}
		}
		if len(streams) != 1 {
			return false
		}
		found = streams[0]
		for url, v := range want {
			short := resource.Lookup(url).Short
			i := slices.IndexFunc(found.Types, func(te xdsdaemon.TypeEntry) bool { return te.Type == short })
			if i < 0 || found.Types[i].State != "SYNCED" || found.Types[i].SentVersion != v || found.Types[i].AckedVersion != v {
				return false
			}
		}
		return true
	})
	return found
}

// configDump returns /config_dump?node=node: the resources by type URL.
func (d *daemonProc) configDump(ctx context.Context, t *testing.T, node string) map[string][]*anypb.Any {
	t.Helper()
	code, body := d.get(ctx, t, "/config_dump?node="+node)
	var dump struct {
		Node      string                       `json:"node"`
		Resources map[string][]json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal([]byte(body), &dump); code != http.StatusOK || err != nil {
		t.Fatalf("/config_dump: %d %v\n%s", code, err, body)
	}
	if dump.Node != node {
		t.Errorf("/config_dump?node=%s: node %q", node, dump.Node)
	}
	out := map[string][]*anypb.Any{}
	for short, raws := range dump.Resources {
		var url string
		for _, ty := range resource.Types() {
			if ty.Short == short {
				url = ty.URL
			}
		}
		if url == "" {
			t.Errorf("/config_dump: unknown type %q", short)
			continue
		}
		for _, raw := range raws {
			a := &anypb.Any{}
			if err := protojson.Unmarshal(raw, a); err != nil {
				t.Fatalf("/config_dump %s: %v\n%s", short, err, raw)
			}
			out[url] = append(out[url], a)
		}
	}
	return out
}

// metric returns the value of one series of /metrics (it must be there).
func (d *daemonProc) metric(ctx context.Context, t *testing.T, series string) float64 {
	t.Helper()
	code, body := d.get(ctx, t, "/metrics")
	v, ok := metricValue(body, series)
	if code != http.StatusOK || !ok {
		t.Fatalf("/metrics: %d, no %s in\n%s", code, series, body)
	}
	return v
}

func metricValue(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// eventually polls f until it reports done, failing t with f's last
// description when ctx ends first.
func eventually(ctx context.Context, t *testing.T, what string, f func() (done bool, last string)) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		done, last := f()
		if done {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last: %s", what, ctx.Err(), last)
		}
	}
}

// ---------------------------------------------------------------------------
// Comparing resources.

// sameResources checks that got (Anys, in any order) are the resources
// of want.
func sameResources(t *testing.T, what string, got []*anypb.Any, want []*resource.Resource) {
	t.Helper()
	gotByName := map[string]proto.Message{}
	var gotNames, wantNames []string
	for _, a := range got {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		r, err := resource.New(m)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		gotByName[r.Name] = m
		gotNames = append(gotNames, r.Name)
	}
	for _, r := range want {
		wantNames = append(wantNames, r.Name)
	}
	sort.Strings(gotNames)
	sort.Strings(wantNames)
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("%s: resources %q, want %q", what, gotNames, wantNames)
		return
	}
	for _, r := range want {
		if m := gotByName[r.Name]; !proto.Equal(m, r.Message) {
			t.Errorf("%s: %s %q differs from the configuration:\ngot  %v\nwant %v", what, r.Type.Short, r.Name, m, r.Message)
		}
	}
}

// sameResourcesByType is sameResources for every type of got and want.
func sameResourcesByType(t *testing.T, what string, got map[string][]*anypb.Any, want map[string][]*resource.Resource) {
	t.Helper()
	for url := range got {
		if _, ok := want[url]; !ok {
			t.Errorf("%s: has %s resources, want none", what, shortType(url))
		}
	}
	for url, rs := range want {
		sameResources(t, what+" "+shortType(url), got[url], rs)
	}
}

// ---------------------------------------------------------------------------
// The configuration directory.

// configDir is a configuration directory and what the test wrote in it.
type configDir struct {
	t     *testing.T
	dir   string
	files map[string]string // path relative to dir -> content
}

func newConfigDir(t *testing.T) *configDir {
	return &configDir{t: t, dir: t.TempDir(), files: map[string]string{}}
}

// write replaces the file rel with content as a careful writer does: it
// writes a temporary file whose name starts with "." (which xdsd ignores)
// and renames it into place, so xdsd never reads half a file.
func (c *configDir) write(rel, content string) {
	c.t.Helper()
	path := filepath.Join(c.dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.t.Fatal(err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		c.t.Fatal(err)
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		c.t.Fatal(err)
	}
	c.files[rel] = content
}

// remove removes the file rel.
func (c *configDir) remove(rel string) {
	c.t.Helper()
	if err := os.Remove(filepath.Join(c.dir, rel)); err != nil {
		c.t.Fatal(err)
	}
	delete(c.files, rel)
}

// resources parses what the test wrote, as xdsd does; it must be valid.
func (c *configDir) resources() []*resource.Resource {
	c.t.Helper()
	var out []*resource.Resource
	for rel, content := range c.files {
		rs, err := configdir.ParseFile(rel, []byte(content))
		if err != nil {
			c.t.Fatalf("the test's own configuration: %v", err)
		}
		out = append(out, rs...)
	}
	return out
}

// byType returns the resources by type URL.
func (c *configDir) byType() map[string][]*resource.Resource {
	out := map[string][]*resource.Resource{}
	for _, r := range c.resources() {
		out[r.Type.URL] = append(out[r.Type.URL], r)
	}
	return out
}

// versions returns, per type URL, the SotW version of all its resources
// (what a wildcard or all-names client holds).
func (c *configDir) versions() map[string]string {
	out := map[string]string{}
	for url, rs := range c.byType() {
		out[url] = setVersion(rs...)
	}
	return out
}

// writeService writes the listener, route, cluster and endpoints of the
// service, with endpoints addrs.
func (c *configDir) writeService(addrs ...string) {
	c.write("listener.yaml", listenerYAML(svcTarget, svcRoute))
	c.write("route.yaml", routeYAML(svcRoute, svcTarget, svcCluster))
	c.write("cluster.yaml", clusterYAML(svcCluster))
	c.write(endpointsFile, endpointsYAML(svcCluster, addrs...))
}

// listenerYAML is an API listener for grpc-go taking route from RDS over
// ADS.
func listenerYAML(name, route string) string {
	return fmt.Sprintf(`# The listener grpc-go resolves for xds:///%[1]s.
resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: %[1]s
  api_listener:
    api_listener:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: %[1]s
      rds:
        route_config_name: %[2]s
        config_source:
          ads: {}
          resource_api_version: V3
      http_filters:
      - name: envoy.filters.http.router
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`, name, route)
}

// routeYAML sends everything for domain to cluster.
func routeYAML(name, domain, cluster string) string {
	return fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: %s
  virtual_hosts:
  - name: vh
    domains: [%q]
    routes:
    - match: {prefix: "/"}
      route: {cluster: %s}
`, name, domain, cluster)
}

// clusterYAML is an EDS cluster over ADS, as a one-item resources list.
func clusterYAML(name string) string {
	return fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %s
  type: EDS
  eds_cluster_config:
    eds_config:
      ads: {}
      resource_api_version: V3
  lb_policy: ROUND_ROBIN
`, name)
}

// endpointsYAML is a resources list holding one ClusterLoadAssignment
// (written in lowerCamelCase, which the loader takes too).
func endpointsYAML(cluster string, addrs ...string) string {
	return "resources:\n" + endpointsItemYAML(cluster, addrs...)
}

// endpointsItemYAML is one ClusterLoadAssignment as a resources list item.
func endpointsItemYAML(cluster string, addrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  clusterName: %s
  endpoints:
  - locality: {region: e2e}
    loadBalancingWeight: 1
    lbEndpoints:
`, cluster)
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, `    - endpoint:
        address:
          socketAddress: {address: %q, portValue: %s}
      healthStatus: HEALTHY
`, host, port)
	}
	return b.String()
}
