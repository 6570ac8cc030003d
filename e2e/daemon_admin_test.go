package e2e_test

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/credentials/insecure"

	xdsdaemon "github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/testutil/xdstest"
	"github.com/xdsd/xdsd/source/configdir"
)

// Admin endpoints.

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
			`go_goroutines`:                              func(v float64) bool { return v > 10 },
			`xdsd_config_last_loaded_timestamp_seconds`: func(v float64) bool {
				return v >= float64(started.UnixMilli())/1e3-0.001 && v <= float64(time.Now().Unix()+1)
			},
		} {
			v, ok := metricValue(body, series)
			if !ok || !check(v) {
				t.Errorf("/metrics %s = %v (present %v)", series, v, ok)
			}
		}
		if runtime.GOOS == "linux" {
			for series, least := range map[string]float64{`process_resident_memory_bytes`: 1 << 20, `process_open_fds`: 4} {
				if v, ok := metricValue(body, series); !ok || v < least {
					t.Errorf("/metrics %s = %v (present %v), want at least %v", series, v, ok, least)
				}
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
	ctx, cancel := context.WithTimeout(context.Background(), quickTimeout)
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
