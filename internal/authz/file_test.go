package authz

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/testutil/testcerts"
)

// writeFile replaces path by renaming a new file over it, as a
// configuration manager does.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authz.yaml")
	writeFile(t, path, "allow:\n- identity: a\n  node_ids: [a]\n")
	if _, err := Open(filepath.Join(t.TempDir(), "none.yaml"), nil); err == nil {
		t.Fatal("Open of a missing file succeeds")
	}
	f, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	allowed := func(node string) bool { return f.Policy().Decide([]string{"a"}, node, "").Allowed }
	if !allowed("a") || allowed("b") {
		t.Fatal("the first policy is not in force")
	}
	writeFile(t, path, "allow:\n- identity: a\n  node_ids: [b]\n")
	if allowed("a") || !allowed("b") {
		t.Fatal("the changed policy is not in force")
	}
	writeFile(t, path, "allow:\n- identity: a\n  node_ids: [b]\n  nodes: [c]\n")
	if !allowed("b") {
		t.Fatal("a bad edit replaced the policy")
	}
	st := f.Status()
	if st.ReloadsOK != 1 || st.ReloadsFailed != 1 || !strings.Contains(st.LastError, "allow[0].nodes") || st.Rules != 1 {
		t.Fatalf("status after a bad edit: %+v", st)
	}
	f.Policy() // the same bad version is not counted again
	if st := f.Status(); st.ReloadsFailed != 1 {
		t.Fatalf("the same bad version counted again: %+v", st)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !allowed("b") || f.Status().ReloadsFailed != 2 {
		t.Fatalf("a removed file: %+v", f.Status())
	}
	writeFile(t, path, "allow:\n- identity: a\n  node_ids: [c]\n")
	if !allowed("c") {
		t.Fatal("the file back is not read")
	}
	if st := f.Status(); st.LastError != "" || st.ReloadsOK != 2 {
		t.Fatalf("status after a good edit: %+v", st)
	}
}

// TestAuthorizeTLS checks Authorize on real mutual TLS connections: the
// peer's verified certificate is what it looks at.
func TestAuthorizeTLS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authz.yaml")
	writeFile(t, path, "allow:\n- identity: spiffe://example.org/ns/*/sa/{id}\n  node_ids: ['{id}']\n- identity: cn-only\n  node_ids: [c]\n")
	f, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca := testcerts.NewCA(t, "ca")
	srv := ca.Issue(t, "server", true)
	handshake := func(client *testcerts.Issued, clientAuth tls.ClientAuthType) context.Context {
		t.Helper()
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		sc := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{srv.TLSCertificate(t)}, ClientAuth: clientAuth, ClientCAs: ca.Pool()})
		ccfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if client != nil {
			ccfg.Certificates = []tls.Certificate{client.TLSCertificate(t)}
		}
		cc := tls.Client(b, ccfg)
		errc := make(chan error, 1)
		go func() { errc <- cc.Handshake() }()
		if err := sc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: sc.ConnectionState()}})
	}
	web := ca.IssueClient(t, "web-cn", []string{"spiffe://example.org/ns/prod/sa/web"}, []string{"web.example.org"})
	cn := ca.IssueClient(t, "cn-only", nil, nil)
	ctx := handshake(&web, tls.RequireAndVerifyClientCert)
	if got := Identities(PeerCertificate(ctx)); strings.Join(got, " ") != "spiffe://example.org/ns/prod/sa/web web.example.org web-cn" {
		t.Fatalf("identities %q", got)
	}
	if err := f.Authorize(ctx, &corev3.Node{Id: "web"}); err != nil {
		t.Fatal(err)
	}
	err = f.Authorize(ctx, &corev3.Node{Id: "db"})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `identity "spiffe://example.org/ns/prod/sa/web" may not claim node "db"`) {
		t.Fatalf("refusal: %v", err)
	}
	if err := f.Authorize(handshake(&cn, tls.RequireAndVerifyClientCert), &corev3.Node{Id: "c"}); err != nil {
		t.Fatal(err)
	}
	// A certificate that was not verified is none.
	if err := f.Authorize(handshake(&cn, tls.RequestClientCert), &corev3.Node{Id: "c"}); !strings.Contains(err.Error(), "no client certificate") {
		t.Fatalf("an unverified certificate: %v", err)
	}
	if err := f.Authorize(handshake(nil, tls.VerifyClientCertIfGiven), &corev3.Node{Id: "c"}); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "no client certificate") {
		t.Fatalf("no certificate: %v", err)
	}
	if err := f.Authorize(context.Background(), &corev3.Node{Id: "c"}); !strings.Contains(err.Error(), "no client certificate") {
		t.Fatalf("no peer: %v", err)
	}
}
