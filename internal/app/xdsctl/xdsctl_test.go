package xdsctl

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/testutil/poll"
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait of these tests.
const waitTimeout = 15 * time.Second

const (
	clusterYAML = `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: hello
  type: EDS
  eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
`
	endpointsYAML = `resources:
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: hello
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: PORT}}}
`
	listenerYAML = `resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: hello
  api_listener:
    api_listener:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: hello
      rds: {route_config_name: hello, config_source: {ads: {}, resource_api_version: V3}}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
	routeYAML = `resources:
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: hello
  virtual_hosts:
  - name: hello
    domains: ["hello"]
    routes:
    - match: {prefix: "/"}
      route: {cluster: CLUSTER}
`
)

// writeFile writes a file atomically, as an editor or deploy tool would:
// a hidden temporary file renamed into place.
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(name))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// configDir returns a directory with a listener, route, cluster and
// endpoints, all named hello.
func configDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "cluster.yaml", clusterYAML)
	writeFile(t, dir, "endpoints/hello.yaml", strings.ReplaceAll(endpointsYAML, "PORT", "50051"))
	writeFile(t, dir, "listener.yaml", listenerYAML)
	writeFile(t, dir, "route.yaml", strings.ReplaceAll(routeYAML, "CLUSTER", "hello"))
	return dir
}

// startXDSD runs xdsd in process on loopback ports until the test ends and
// returns its addresses once it has loaded the configuration.
func startXDSD(t *testing.T, o daemon.Options) daemon.Addrs {
	t.Helper()
	o.XDSAddr, o.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.ShutdownGrace = 100 * time.Millisecond
	ready := make(chan daemon.Addrs, 1)
	o.Ready = func(a daemon.Addrs) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon.Run: %v", err)
		}
	})
	var addrs daemon.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("daemon.Run: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("xdsd did not start")
	}
	eventually(t, "xdsd ready", func() bool {
		var rep daemon.StatusReport
		admin := adminFlags{addr: addrs.Admin, tokenFile: o.AdminTokenFile}
		return admin.get(context.Background(), "/status", nil, &rep) == nil && rep.Ready
	})
	return addrs
}

// eventually polls cond until it holds, failing the test after
// waitTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, waitTimeout, what, cond)
}

// syncBuffer is a buffer safe for concurrent use that tells waiters about
// each write.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // capacity 1
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{written: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.written <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer holds cond's wish.
func (b *syncBuffer) waitFor(t *testing.T, what string, cond func(string) bool) string {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		s := b.String()
		if cond(s) {
			return s
		}
		select {
		case <-b.written:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; output so far:\n%s", what, s)
		}
	}
}

// run runs xdsctl in process.
func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// jsonEvents decodes watch/get's JSON output, one object a line.
func jsonEvents(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		evs = append(evs, m)
	}
	return evs
}

func TestGet(t *testing.T) {
	addrs := startXDSD(t, daemon.Options{ConfigDir: configDir(t)})
	srv := "--server=" + addrs.XDS

	for _, variant := range [][]string{{}, {"--delta"}, {"--ads=false"}, {"--delta", "--ads=false"}} {
		t.Run(strings.Join(append([]string{"variant"}, variant...), ""), func(t *testing.T) {
			for _, typ := range []string{"cds", "eds", "lds", "rds"} {
				args := append([]string{"get", srv, "--type", typ, "--output", "json"}, variant...)
				code, out, errs := run(append(args, "hello")...)
				if code != 0 {
					t.Fatalf("%v hello: exit %d, stderr %s", args, code, errs)
				}
				evs := jsonEvents(t, out)
				if len(evs) != 1 || evs[0]["name"] != "hello" || evs[0]["type"] != typ || evs[0]["version"] == "" || evs[0]["resource"] == nil {
					t.Errorf("%v hello: got %v", args, evs)
				}
			}
		})
	}

	t.Run("wildcard", func(t *testing.T) {
		// Over SotW: an empty list for clusters, "*" for endpoints and
		// routes, whose empty list would ask for nothing.
		for _, typ := range []string{"cds", "eds", "rds"} {
			code, out, errs := run("get", srv, "--type", typ)
			if code != 0 || !strings.Contains(out, "name: hello") || !strings.Contains(out, "event: update") {
				t.Errorf("get %s: exit %d, stdout:\n%s\nstderr: %s", typ, code, out, errs)
			}
		}
		// A wildcard of a full-state type (scoped routes too, which Envoy
		// takes as full state) is answered at once, when there are none
		// with an empty response: nothing to print, and no error.
		code, out, errs := run("get", srv, "--type", "srds", "--timeout", "10s")
		if code != 0 || out != "" {
			t.Errorf("get srds (none configured): exit %d, stdout %q, stderr %s", code, out, errs)
		}
		// xdsd sends nothing for a wildcard of a type it has none of that
		// is not full state, for an empty list asks for nothing.
		code, out, errs = run("get", srv, "--type", "sds", "--timeout", "300ms")
		if code != 1 || out != "" || !strings.Contains(errs, "sent no sds resources") {
			t.Errorf("get sds (none configured): exit %d, stdout %q, stderr %s", code, out, errs)
		}
	})

	t.Run("missing", func(t *testing.T) {
		// Full-state types over SotW and delta answer at once.
		for _, args := range [][]string{
			{"--type", "cds"}, {"--type", "lds"}, {"--type", "eds", "--delta"}, {"--type", "rds", "--delta"},
		} {
			args = append([]string{"get", srv}, args...)
			code, out, errs := run(append(args, "hello", "nope", "gone")...)
			if code != 1 || !strings.Contains(errs, "2 of 3") || !strings.Contains(errs, "gone, nope") {
				t.Errorf("%v: exit %d, stderr %q", args, code, errs)
			}
			if !strings.Contains(out, "name: hello") {
				t.Errorf("%v: the existing resource is not printed:\n%s", args, out)
			}
		}
		// Over SotW, other types are never answered for a missing name:
		// once --timeout passes it counts as missing, and what exists is
		// printed.
		code, out, errs := run("get", srv, "--type", "eds", "--timeout", "1s", "hello", "nope")
		if code != 1 || !strings.Contains(errs, "1 of 2 eds resources not found: nope") || !strings.Contains(out, "name: hello") {
			t.Errorf("get eds hello nope: exit %d, stdout:\n%s\nstderr %q", code, out, errs)
		}
		start := time.Now()
		code, _, errs = run("get", srv, "--type", "eds", "--timeout", "300ms", "nope")
		if code != 1 || !strings.Contains(errs, "nope") {
			t.Errorf("get eds nope: exit %d, stderr %q", code, errs)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("get eds nope took %v with --timeout 300ms", d)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		code, _, errs := run("get", "--server", "127.0.0.1:1", "--type", "cds", "--timeout", "5s")
		if code != 1 || !strings.Contains(errs, "127.0.0.1:1") {
			t.Errorf("exit %d, stderr %q", code, errs)
		}
	})

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"get", srv}, {"get", srv, "--type", "xds"}, {"get", srv, "--type", "cds", "--output", "xml"},
			{"get", srv, "--type", "cds", "--insecure", "--ca", "x.pem"}, {"get", "--bogus"},
			{"get", srv, "--type", "vhds"}, {"watch", srv, "--type", "type.googleapis.com/no.Such"},
			{"watch", srv, "--type", "cds", "--count", "-1"},
		} {
			if code, _, errs := run(args...); code != 2 || errs == "" {
				t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errs)
			}
		}
	})
}

func TestWatch(t *testing.T) {
	dir := configDir(t)
	addrs := startXDSD(t, daemon.Options{ConfigDir: dir})

	out, errb := newSyncBuffer(), newSyncBuffer()
	done := make(chan int, 1)
	go func() {
		done <- Run(context.Background(), []string{"watch", "--server", addrs.XDS, "--type", "eds", "--output", "json", "--count", "2", "hello"}, out, errb)
	}()
	out.waitFor(t, "the first update", func(s string) bool { return strings.Count(s, "\n") >= 1 })
	writeFile(t, dir, "endpoints/hello.yaml", strings.ReplaceAll(endpointsYAML, "PORT", "50052"))
	var code int
	select {
	case code = <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("watch did not end after 2 events; output:\n%s", out.String())
	}
	if code != 0 {
		t.Fatalf("watch: exit %d, stderr %s", code, errb.String())
	}
	evs := jsonEvents(t, out.String())
	if len(evs) != 2 {
		t.Fatalf("got %d events, want 2:\n%s", len(evs), out.String())
	}
	if evs[0]["version"] == evs[1]["version"] {
		t.Errorf("the change kept the version %v", evs[0]["version"])
	}
	for i, port := range []string{"50051", "50052"} {
		b, _ := json.Marshal(evs[i]["resource"])
		if evs[i]["event"] != "update" || evs[i]["name"] != "hello" || !strings.Contains(string(b), `"port_value":`+port) {
			t.Errorf("event %d: %v, want an update of hello with port %s", i, evs[i], port)
		}
	}

	// Deleting the listener shows as does_not_exist on a wildcard watch;
	// the watch runs until its context ends.
	out = newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- Run(ctx, []string{"watch", "--server", addrs.XDS, "--type", "lds"}, out, errb)
	}()
	out.waitFor(t, "the listener", func(s string) bool { return strings.Contains(s, "name: hello") })
	if err := os.Remove(filepath.Join(dir, "listener.yaml")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "the listener's deletion", func(s string) bool {
		return strings.Contains(s, "---\nevent: does_not_exist\ntype: lds\n")
	})
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("watch ended with %d", code)
	}
}

func TestStatus(t *testing.T) {
	addrs := startXDSD(t, daemon.Options{ConfigDir: configDir(t)})
	status := func() string {
		code, out, errs := run("status", "--admin", addrs.Admin)
		if code != 0 {
			t.Fatalf("status: exit %d, stderr %s", code, errs)
		}
		return out
	}
	if out := status(); !strings.Contains(out, "NODE") || !strings.Contains(out, "no streams") ||
		!regexp.MustCompile(`\nConfiguration loaded at \d{4}-\d\d-\d\dT\S+ \([1-9]\d* loads, 0 rejected\)\n`).MatchString(out) {
		t.Errorf("status with no streams, a configuration loaded:\n%s", out)
	}

	// A connected client: SYNCED.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"watch", "--server", addrs.XDS, "--type", "cds", "--node", "synced-node", "--cluster", "edge"}, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		<-done
	}()
	var out string
	eventually(t, "a SYNCED row", func() bool {
		out = status()
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[0] == "synced-node" && f[1] == "(edge)" && f[3] == "ads/sotw" && f[4] == "SYNCED" {
				return true
			}
		}
		return false
	})
	if !strings.HasPrefix(out, "NODE") || !strings.Contains(strings.Split(out, "\n")[0], "CDS") {
		t.Errorf("header:\n%s", out)
	}

	// A NACK, with its message.
	conn, err := grpc.NewClient(addrs.XDS, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "nacker"}, TypeUrl: resource.ClusterType}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: resp.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: 3, Message: "cluster hello: unsupported lb policy"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a NACKED row and its message", func() bool {
		out = status()
		return strings.Contains(out, "NACKED") && strings.Contains(out, "NACKs:") &&
			strings.Contains(out, "nacker stream") && strings.Contains(out, "cds: version \""+resp.GetVersionInfo()+"\" NACKED") &&
			strings.Contains(out, "cluster hello: unsupported lb policy")
	})
	if !strings.Contains(out, "SYNCED") {
		t.Errorf("the other stream is no longer SYNCED:\n%s", out)
	}
	t.Logf("status:\n%s", out)
	scancel()

	if code, _, errs := run("status", "--admin", "127.0.0.1:1"); code != 1 || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("unreachable admin: exit %d, stderr %q", code, errs)
	}
}

func TestStatusConfigError(t *testing.T) {
	dir := configDir(t)
	addrs := startXDSD(t, daemon.Options{ConfigDir: dir})
	writeFile(t, dir, "route.yaml", strings.ReplaceAll(routeYAML, "CLUSTER", "nowhere"))
	eventually(t, "the rejected configuration in status", func() bool {
		_, out, _ := run("status", "--admin", addrs.Admin)
		return strings.Contains(out, "Configuration rejected") && strings.Contains(out, "nowhere")
	})
}

func TestValidate(t *testing.T) {
	dir := configDir(t)
	code, out, errs := run("validate", dir)
	if code != 0 || out != "ok: 4 resources in 4 files\n" {
		t.Errorf("validate: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	writeFile(t, dir, "route.yaml", strings.ReplaceAll(routeYAML, "CLUSTER", "nowhere"))
	writeFile(t, dir, "bad.yaml", "resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: x\n  colour: blue\n")
	code, out, errs = run("validate", dir)
	if code != 1 {
		t.Errorf("validate: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Errorf("want 2 problems, got:\n%s", out)
	}
	for _, want := range []string{filepath.Join(dir, "route.yaml") + ": rds \"hello\": ", "nowhere", filepath.Join(dir, "bad.yaml") + ": ", "colour"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "2 problem(s)") {
		t.Errorf("stderr %q", errs)
	}

	for _, args := range [][]string{{"validate"}, {"validate", "a", "b"}} {
		if code, _, _ := run(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, errs := run("validate", filepath.Join(dir, "missing")); code != 1 || !strings.Contains(errs, "missing") {
		t.Errorf("missing dir: exit %d, stderr %q", code, errs)
	}
}

func TestDump(t *testing.T) {
	addrs := startXDSD(t, daemon.Options{ConfigDir: configDir(t)})
	code, out, errs := run("dump", "--admin", addrs.Admin, "--node", "n1")
	if code != 0 {
		t.Fatalf("dump: exit %d, stderr %s", code, errs)
	}
	for _, want := range []string{"node: n1\n", "resources:\n", "  cds:\n", "  eds:\n", "  lds:\n", "  rds:\n", "name: hello", "cluster_name: hello"} {
		if !strings.Contains(out, want) {
			t.Errorf("dump lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = run("dump", "--admin", "http://"+addrs.Admin+"/", "--node", "n1", "--output", "json")
	if code != 0 {
		t.Fatalf("dump json: exit %d, stderr %s", code, errs)
	}
	var d struct {
		Node      string                      `json:"node"`
		Resources map[string][]map[string]any `json:"resources"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Node != "n1" || len(d.Resources["cds"]) != 1 || d.Resources["cds"][0]["name"] != "hello" {
		t.Errorf("dump json: %+v", d)
	}
	if code, _, _ := run("dump", "--admin", addrs.Admin); code != 2 {
		t.Errorf("dump without --node: exit %d, want 2", code)
	}
}

func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	srvCert := ca.Issue(t, "xdsd", true)
	cliCert := ca.Issue(t, "xdsctl", false)
	dir := t.TempDir()
	files := map[string][]byte{"ca.pem": ca.CertPEM, "server.pem": srvCert.CertPEM, "server-key.pem": srvCert.KeyPEM,
		"client.pem": cliCert.CertPEM, "client-key.pem": cliCert.KeyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	addrs := startXDSD(t, daemon.Options{ConfigDir: configDir(t), TLSCert: p("server.pem"), TLSKey: p("server-key.pem"), ClientCA: p("ca.pem")})
	base := []string{"get", "--server", addrs.XDS, "--type", "cds", "--timeout", "5s"}

	args := append(base, "--ca", p("ca.pem"), "--cert", p("client.pem"), "--key", p("client-key.pem"), "--server-name", "localhost", "hello")
	if code, out, errs := run(args...); code != 0 || !strings.Contains(out, "name: hello") {
		t.Errorf("mutual TLS: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	args = append(base, "--tls", "--ca", p("ca.pem"), "--cert", p("client.pem"), "--key", p("client-key.pem"), "hello")
	if code, _, errs := run(args...); code != 0 {
		t.Errorf("mutual TLS, name from --server: exit %d, stderr %q", code, errs)
	}
	for what, args := range map[string][]string{
		"plaintext":          base,
		"no client cert":     append(base, "--ca", p("ca.pem")),
		"unknown server CA":  append(base, "--tls", "--cert", p("client.pem"), "--key", p("client-key.pem")),
		"wrong server name":  append(base, "--ca", p("ca.pem"), "--cert", p("client.pem"), "--key", p("client-key.pem"), "--server-name", "other.example"),
		"key without a cert": append(base, "--key", p("client-key.pem")),
	} {
		code, _, errs := run(args...)
		if code == 0 || errs == "" {
			t.Errorf("%s: exit %d, stderr %q; want a failure", what, code, errs)
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := run("--help")
	if code != 0 || !strings.Contains(out, "Commands") || !strings.Contains(out, "Examples:") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
	for _, cmd := range []string{"watch", "get", "status", "dump", "validate"} {
		code, out, _ := run(cmd, "--help")
		// validate has no flags: no "Flags:" heading over nothing.
		if code != 0 || !strings.HasPrefix(out, "Usage: xdsctl "+cmd) || !strings.Contains(out, "Examples:") || strings.Contains(out, "Flags:") == (cmd == "validate") {
			t.Errorf("%s --help: exit %d:\n%s", cmd, code, out)
		}
		if code, out2, _ := run("help", cmd); code != 0 || out2 != out {
			t.Errorf("help %s differs from %s --help", cmd, cmd)
		}
	}
	if code, out, _ := run("version"); code != 0 || !strings.HasPrefix(out, "xdsctl ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if code, _, errs := run(); code != 2 || !strings.Contains(errs, "Usage") {
		t.Errorf("no command: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := run("frobnicate"); code != 2 || !strings.Contains(errs, "unknown command") {
		t.Errorf("unknown command: exit %d, stderr %q", code, errs)
	}
}
