package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	xdsdaemon "github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
	"github.com/xdsd/xdsd/internal/testutil/xdstest"
)

// Node identity bound to client certificates (--authz-file).

const (
	authzV1 = `allow:
- identity: spiffe://example.org/node/node-a
  node_ids: [node-a]
- identity: spiffe://example.org/ns/*/sa/{id}
  node_ids: ["{id}"]
`
	// authzV2 drops the fleet's rule for web, and allows DNS names.
	authzV2 = `allow:
- identity: spiffe://example.org/node/node-a
  node_ids: [node-a]
- identity: spiffe://example.org/ns/*/sa/grpc-node
  node_ids: [grpc-node]
- identity: "{host}.dns.example.org"
  node_ids: ["{host}"]
`
)

// authzPKI is a CA, xdsd's certificate and key, and the client
// certificates of the tests, in files.
type authzPKI struct {
	ca                              *testcerts.CA
	caFile, certFile, keyFile       string
	nodeA, web, dnsHost, grpcClient testcerts.Issued
	dir                             string
}

func newAuthzPKI(t *testing.T) *authzPKI {
	p := &authzPKI{ca: testcerts.NewCA(t, "xdsd authz CA"), dir: t.TempDir()}
	srv := p.ca.Issue(t, "xdsd", true)
	p.caFile, p.certFile, p.keyFile = filepath.Join(p.dir, "ca.crt"), filepath.Join(p.dir, "tls.crt"), filepath.Join(p.dir, "tls.key")
	writeFile(t, p.caFile, p.ca.CertPEM)
	writeFile(t, p.certFile, srv.CertPEM)
	writeFile(t, p.keyFile, srv.KeyPEM)
	p.nodeA = p.ca.IssueClient(t, "node-a-cn", []string{"spiffe://example.org/node/node-a"}, nil)
	p.web = p.ca.IssueClient(t, "web", []string{"spiffe://example.org/ns/prod/sa/web"}, []string{"web.example.org"})
	p.dnsHost = p.ca.IssueClient(t, "", nil, []string{"host1.dns.example.org"})
	p.grpcClient = p.ca.IssueClient(t, "grpc", []string{"spiffe://example.org/ns/prod/sa/grpc-node"}, nil)
	return p
}

// tlsConfig is a client's: it trusts the CA and presents client (none if
// nil).
func (p *authzPKI) tlsConfig(t *testing.T, client *testcerts.Issued) *tls.Config {
	cfg := &tls.Config{RootCAs: p.ca.Pool()}
	if client != nil {
		cfg.Certificates = []tls.Certificate{client.TLSCertificate(t)}
	}
	return cfg
}

func (p *authzPKI) creds(t *testing.T, client *testcerts.Issued) credentials.TransportCredentials {
	return credentials.NewTLS(p.tlsConfig(t, client))
}

// replaceFile writes data to path by renaming a new file over it.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	writeFile(t, path+".new", []byte(data))
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// TestDaemon_authz runs xdsd with mutual TLS and a policy, on both gRPC
// transports, and checks who gets what over gRPC and REST, as the policy
// is changed, broken and fixed.
func TestDaemon_authz(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"xdsd", "grpc-go"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			testDaemonAuthz(t, transport)
		})
	}
}

func testDaemonAuthz(t *testing.T, transport string) {
	pki := newAuthzPKI(t)
	policy := filepath.Join(pki.dir, "authz.yaml")
	writeFile(t, policy, []byte(authzV1))
	backend, _ := xdstest.StartBackend(t)
	cfg := newConfigDir(t)
	cfg.writeService(backend)
	d := startReady(t, nil, serveArgs(cfg.dir, "--grpc-transport", transport, "--tls-cert", pki.certFile, "--tls-key", pki.keyFile,
		"--client-ca", pki.caFile, "--authz-file", policy)...)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	refused := func(t *testing.T, err error, msg string) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), msg) {
			t.Fatalf("got %v, want PermissionDenied saying %q", err, msg)
		}
	}
	if _, err := fetchClustersAs(ctx, d.xds, pki.creds(t, &pki.nodeA), "node-a"); err != nil {
		t.Fatalf("node-a with its certificate: %v", err)
	}
	_, err := fetchClustersAs(ctx, d.xds, pki.creds(t, &pki.nodeA), "node-b")
	refused(t, err, `identity "spiffe://example.org/node/node-a" may not claim node "node-b"`)
	if _, err := fetchClustersAs(ctx, d.xds, pki.creds(t, nil), "node-a"); status.Code(err) != codes.Unavailable {
		t.Fatalf("no client certificate: %v, want the handshake refused (Unavailable)", err)
	}
	d.waitLogLine(ctx, t, "the refusal logged", "refused a client the node it claims", `node=node-b`, `identity=spiffe://example.org/node/node-a`)

	// A stream of web, opened under the first policy, which the second
	// takes away: it keeps going, and a later request naming another node
	// changes nothing.
	cc, err := grpc.NewClient("passthrough:///"+d.xds, grpc.WithTransportCredentials(pki.creds(t, &pki.web)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	old, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "web"}, TypeUrl: cds}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Recv(); err != nil {
		t.Fatalf("web under the first policy: %v", err)
	}
	st := d.waitStatus(ctx, t, "web's stream", func(s xdsdaemon.StatusReport) bool {
		for _, e := range s.Streams {
			if e.NodeID == "web" && e.Identity == "spiffe://example.org/ns/prod/sa/web" {
				return true
			}
		}
		return false
	})
	if st.Authz == nil || st.Authz.Rules != 2 || st.Authz.LastError != "" {
		t.Fatalf("/status authz: %+v", st.Authz)
	}

	replaceFile(t, policy, authzV2)
	d.waitStatus(ctx, t, "the new policy read", func(s xdsdaemon.StatusReport) bool {
		return s.Authz != nil && s.Authz.ReloadsOK == 1 && s.Authz.Rules == 3
	})
	_, err = fetchClustersAs(ctx, d.xds, pki.creds(t, &pki.web), "web")
	refused(t, err, `identity "spiffe://example.org/ns/prod/sa/web" may not claim node "web"`)
	if _, err := fetchClustersAs(ctx, d.xds, pki.creds(t, &pki.dnsHost), "host1"); err != nil {
		t.Fatalf("a DNS name under the new policy: %v", err)
	}
	if err := old.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "node-a"}, TypeUrl: eds, ResourceNames: []string{svcCluster}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := old.Recv(); err != nil || len(resp.GetResources()) != 1 {
		t.Fatalf("the stream opened before the change: %v, %v", resp, err)
	}
	for _, e := range d.status(ctx, t).Streams {
		if e.Identity == "spiffe://example.org/ns/prod/sa/web" && e.NodeID != "web" {
			t.Fatalf("a later request's node was taken: %+v", e)
		}
	}

	// A bad edit keeps the policy in force, and says so.
	replaceFile(t, policy, authzV2+"  nodes: [x]\n")
	d.waitStatus(ctx, t, "the bad edit reported", func(s xdsdaemon.StatusReport) bool {
		return s.Authz != nil && strings.Contains(s.Authz.LastError, "allow[2].nodes")
	})
	if v := d.metric(ctx, t, "xdsd_authz_policy_refused"); v != 1 {
		t.Fatalf("xdsd_authz_policy_refused = %v, want 1", v)
	}
	if _, err := fetchClustersAs(ctx, d.xds, pki.creds(t, &pki.dnsHost), "host1"); err != nil {
		t.Fatalf("after a bad edit: %v", err)
	}
	if v := d.metric(ctx, t, "xdsd_authz_denied_total"); v != 2 {
		t.Fatalf("xdsd_authz_denied_total = %v, want 2", v)
	}

	// grpc-go's xDS client, on mutual TLS, allowed its node.
	clientCert, clientKey := filepath.Join(pki.dir, "grpc.crt"), filepath.Join(pki.dir, "grpc.key")
	writeFile(t, clientCert, pki.grpcClient.CertPEM)
	writeFile(t, clientKey, pki.grpcClient.KeyPEM)
	xc := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.BootstrapTLS(d.xds, "grpc-node", pki.caFile, clientCert, clientKey))
	waitBackend(ctx, t, xc, backend)

	// REST, over the xDS port's TLS, with client certificates.
	post := func(client *testcerts.Issued, node string) (int, string, error) {
		tr := &http.Transport{TLSClientConfig: pki.tlsConfig(t, client), DisableKeepAlives: true, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		body, _ := protojson.Marshal(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: node}})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+d.rest+"/v3/discovery:clusters", bytes.NewReader(body))
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	if code, body, err := post(&pki.nodeA, "node-a"); err != nil || code != http.StatusOK || !strings.Contains(body, svcCluster) {
		t.Fatalf("REST, allowed: %d %s %v", code, body, err)
	}
	if code, body, err := post(&pki.nodeA, "node-b"); err != nil || code != http.StatusForbidden ||
		!strings.Contains(body, `identity "spiffe://example.org/node/node-a" may not claim node "node-b"`) {
		t.Fatalf("REST, refused: %d %s %v", code, body, err)
	}
	if _, _, err := post(nil, "node-a"); err == nil {
		t.Fatal("REST without a client certificate got an answer")
	}
	if v := d.metric(ctx, t, "xdsd_authz_denied_total"); v != 3 {
		t.Fatalf("xdsd_authz_denied_total = %v, want 3", v)
	}
}

// TestDaemon_authz_startup: a policy that does not load, or one without
// client certificates, stops xdsd at start-up; mutual TLS without a
// policy warns.
func TestDaemon_authz_startup(t *testing.T) {
	t.Parallel()
	pki := newAuthzPKI(t)
	bad := filepath.Join(pki.dir, "bad.yaml")
	writeFile(t, bad, []byte("allow:\n- identity: a/{id}\n  node_ids: ['{x}']\n"))
	good := filepath.Join(pki.dir, "good.yaml")
	writeFile(t, good, []byte(authzV1))
	cfg := newConfigDir(t)
	cfg.writeService(dummyA)
	tlsArgs := []string{"--tls-cert", pki.certFile, "--tls-key", pki.keyFile}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(tlsArgs, "--client-ca", pki.caFile, "--authz-file", bad), `allow[0].node_ids[0]: \"{x}\": unknown capture {x}`},
		{append(tlsArgs, "--client-ca", pki.caFile, "--authz-file", filepath.Join(pki.dir, "none.yaml")), "none.yaml"},
		{append(tlsArgs, "--authz-file", good), "a policy needs client certificates"},
		{[]string{"--rest-tls-cert", pki.certFile}, "REST tls: give both a certificate and a key"},
	} {
		code, _, stderr := runXDSD(ctx, t, nil, serveArgs(cfg.dir, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("xdsd %q: exit %d, stderr %s; want an error with %q", c.args, code, stderr, c.want)
		}
	}
	d := startReady(t, nil, serveArgs(cfg.dir, append(tlsArgs, "--client-ca", pki.caFile)...)...)
	d.waitLogLine(ctx, t, "the warning of no policy", "no --authz-file: any client with a certificate from --client-ca may claim any node")

	// REST's own certificate, and the client CA's certificates required
	// there too.
	restCert := pki.ca.Issue(t, "xdsd-rest", true)
	restCertFile, restKeyFile := filepath.Join(pki.dir, "rest.crt"), filepath.Join(pki.dir, "rest.key")
	writeFile(t, restCertFile, restCert.CertPEM)
	writeFile(t, restKeyFile, restCert.KeyPEM)
	r := startReady(t, nil, serveArgs(cfg.dir, append(tlsArgs, "--client-ca", pki.caFile, "--authz-file", good,
		"--rest-tls-cert", restCertFile, "--rest-tls-key", restKeyFile)...)...)
	conn, err := tls.Dial("tcp", r.rest, pki.tlsConfig(t, &pki.nodeA))
	if err != nil {
		t.Fatal(err)
	}
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "xdsd-rest" {
		t.Errorf("REST serves the certificate of %q, want xdsd-rest", cn)
	}
	conn.Close()
	if conn, err := tls.Dial("tcp", r.xds, pki.tlsConfig(t, &pki.nodeA)); err != nil {
		t.Fatal(err)
	} else {
		if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "xdsd" {
			t.Errorf("xDS serves the certificate of %q, want xdsd", cn)
		}
		conn.Close()
	}
	tr := &http.Transport{TLSClientConfig: pki.tlsConfig(t, nil), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: tr}).Post("https://"+r.rest+"/v3/discovery:clusters", "application/json", strings.NewReader("{}")); err == nil {
		resp.Body.Close()
		t.Fatalf("REST without a client certificate: %s, want the handshake refused", resp.Status)
	}
}
