package e2e_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	xdsdaemon "github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/app/xdsctl"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/xdstest"
	"github.com/xdsd/xdsd/source/etcdstore"
)

// etcdServeArgs returns the arguments of `xdsd serve` reading etcd at
// endpoint, on loopback ports chosen by the kernel, with extra appended.
func etcdServeArgs(endpoint, name string, extra ...string) []string {
	return append([]string{"serve", "--etcd-endpoints", endpoint, "--replica-name", name,
		"--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--rest-addr", "127.0.0.1:0"}, extra...)
}

// serviceFiles is the service of the daemon tests as files, with
// endpoints addrs.
func serviceFiles(addrs ...string) map[string][]byte {
	return map[string][]byte{
		"listener.yaml": []byte(listenerYAML(svcTarget, svcRoute)),
		"route.yaml":    []byte(routeYAML(svcRoute, svcTarget, svcCluster)),
		"cluster.yaml":  []byte(clusterYAML(svcCluster)),
		endpointsFile:   []byte(endpointsYAML(svcCluster, addrs...)),
	}
}

// TestDaemon_etcd runs two replicas on one etcd: a change applied to etcd
// reaches a grpc-go client through either; an invalid key is rejected by
// both, which keep serving; with etcd killed they serve on and say so,
// and once it is back changes flow again. A replica started while etcd is
// down is not ready until it has read a configuration.
func TestDaemon_etcd(t *testing.T) {
	t.Parallel()
	addrA, _ := xdstest.StartBackend(t)
	addrB, _ := xdstest.StartBackend(t)
	etcd := etcdtest.Start(t)
	cli := etcd.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	applyFiles := func(ch etcdstore.Change) etcdstore.Applied {
		t.Helper()
		a, err := etcdstore.Apply(ctx, cli, "", ch)
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		return a
	}
	applyFiles(etcdstore.Change{Files: serviceFiles(addrA), Prune: true})
	r1 := startReady(t, nil, etcdServeArgs(etcd.Endpoint, "r1")...)
	r2 := startReady(t, nil, etcdServeArgs(etcd.Endpoint, "r2")...)
	applied := func(d *xdsdaemon.StatusReport, rev int64) bool {
		return d.Store != nil && d.Store.Revision >= rev
	}

	cc1 := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(r1.xds, "node-1"))
	cc2 := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(r2.xds, "node-2"))
	waitBackend(ctx, t, cc1, addrA)
	waitBackend(ctx, t, cc2, addrA)

	t.Run("a_change_reaches_both_replicas", func(t *testing.T) {
		a := applyFiles(etcdstore.Change{Files: map[string][]byte{endpointsFile: []byte(endpointsYAML(svcCluster, addrB))}})
		waitBackend(ctx, t, cc1, addrB)
		waitBackend(ctx, t, cc2, addrB)
		for _, d := range []*daemonProc{r1, r2} {
			st := d.waitStatus(ctx, t, "the applied revision", func(s xdsdaemon.StatusReport) bool { return applied(&s, a.Revision) })
			if !st.Store.Reachable || st.Store.Prefix != etcdstore.DefaultPrefix {
				t.Fatalf("store status %+v", st.Store)
			}
			if v := d.metric(ctx, t, "xdsd_store_revision"); int64(v) < a.Revision {
				t.Fatalf("xdsd_store_revision %v, want at least %d", v, a.Revision)
			}
		}
		if st := r1.status(ctx, t); st.Store.Replica != "r1" {
			t.Fatalf("replica name %q, want r1", st.Store.Replica)
		}
	})

	t.Run("xdsctl_apply_wait_and_replicas", func(t *testing.T) {
		dir := t.TempDir()
		for path, data := range serviceFiles(addrA) {
			writeTestFile(t, filepath.Join(dir, path), data)
		}
		var out, errOut bytes.Buffer
		if code := xdsctl.Run(ctx, []string{"apply", "--etcd-endpoints", etcd.Endpoint, "--prune", "--wait", dir}, &out, &errOut); code != 0 {
			t.Fatalf("xdsctl apply --wait = %d %q %q", code, out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), "read by all 2 replica(s)") {
			t.Fatalf("xdsctl apply --wait: %q", out.String())
		}
		// Read by both: their clients follow within moments.
		waitBackend(ctx, t, cc1, addrA)
		waitBackend(ctx, t, cc2, addrA)
		out.Reset()
		if code := xdsctl.Run(ctx, []string{"replicas", "--etcd-endpoints", etcd.Endpoint}, &out, &errOut); code != 0 {
			t.Fatalf("xdsctl replicas = %d %q", code, errOut.String())
		}
		for _, want := range []string{"r1", "r2", r1.xds, r2.xds, "APPLIED"} {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("xdsctl replicas lacks %q:\n%s", want, out.String())
			}
		}
		a := applyFiles(etcdstore.Change{Files: map[string][]byte{endpointsFile: []byte(endpointsYAML(svcCluster, addrB))}})
		waitBackend(ctx, t, cc1, addrB)
		waitBackend(ctx, t, cc2, addrB)
		for _, d := range []*daemonProc{r1, r2} {
			d.waitStatus(ctx, t, "the applied revision", func(s xdsdaemon.StatusReport) bool { return applied(&s, a.Revision) })
		}
	})

	t.Run("an_invalid_key_is_rejected_by_both", func(t *testing.T) {
		key := "/xdsd/config/0/" + endpointsFile // written around xdsctl's checks, as etcdctl would
		if _, err := cli.Put(ctx, key, "resources: [{\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, nope: 1}]"); err != nil {
			t.Fatal(err)
		}
		for _, d := range []*daemonProc{r1, r2} {
			d.waitStatus(ctx, t, "the rejection", func(s xdsdaemon.StatusReport) bool {
				return strings.Contains(s.Config.LastError, endpointsFile) && strings.Contains(s.Config.LastError, "/xdsd/config/0/")
			})
		}
		callN(ctx, t, cc1, addrB, 3)
		callN(ctx, t, cc2, addrB, 3)
		applyFiles(etcdstore.Change{Files: serviceFiles(addrB)})
	})

	t.Run("etcd_down_the_replicas_serve_on", func(t *testing.T) {
		etcd.Kill()
		for _, d := range []*daemonProc{r1, r2} {
			d.waitStatus(ctx, t, "etcd unreachable", func(s xdsdaemon.StatusReport) bool { return s.Store != nil && !s.Store.Reachable })
			if v := d.metric(ctx, t, "xdsd_store_reachable"); v != 0 {
				t.Fatalf("xdsd_store_reachable %v with etcd down", v)
			}
		}
		callN(ctx, t, cc1, addrB, 3)
		callN(ctx, t, cc2, addrB, 3)

		// A replica started now has nothing to serve yet.
		r3 := startDaemon(t, nil, etcdServeArgs(etcd.Endpoint, "r3")...)
		if code, _ := r3.get(ctx, t, "/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz of a replica that has read nothing: %d, want 503", code)
		}

		etcd.Restart()
		r3.waitReady(ctx, t)
		applyFiles(etcdstore.Change{Files: map[string][]byte{endpointsFile: []byte(endpointsYAML(svcCluster, addrA))}})
		waitBackend(ctx, t, cc1, addrA)
		waitBackend(ctx, t, cc2, addrA)
		cc3 := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(r3.xds, "node-3"))
		waitBackend(ctx, t, cc3, addrA)
	})
}

// writeTestFile writes data at path, making its directory.
func writeTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
