package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/h2grpc"
	"github.com/xdsd/xdsd/internal/authz"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
	"github.com/xdsd/xdsd/server"
)

const authzPolicy = `
allow:
- identity: spiffe://example.org/ns/*/sa/{id}
  node_ids: ["{id}"]
- identity: "*.dns.example.org"
  node_ids: [dns-node]
- identity: cn-client
  node_ids: [cn-node]
  node_clusters: [edge]
`

// authzEnv is a server with an authorization policy on mutual TLS.
type authzEnv struct {
	srv      *server.Server
	addr     string
	ca       *testcerts.CA
	insecure bool // no TLS at all
}

// startAuthz runs a server on transport ("xdsd" or "grpc-go") whose
// clients' certificates are verified if they give one (so that a client
// without one reaches the policy), with authzPolicy; without TLS if plain.
func startAuthz(t *testing.T, transport string, plain bool) *authzEnv {
	t.Helper()
	p, err := authz.Parse([]byte(authzPolicy))
	if err != nil {
		t.Fatal(err)
	}
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Endpoints("a", 1)))
	srv := server.New(c, server.Config{Authorize: func(ctx context.Context, node *corev3.Node) error {
		d := p.Decide(authz.Identities(authz.PeerCertificate(ctx)), node.GetId(), node.GetCluster())
		if !d.Allowed {
			return status.Error(codes.PermissionDenied, d.Reason)
		}
		return nil
	}})
	ca := testcerts.NewCA(t, "ca")
	var tlsCfg *tls.Config
	if !plain {
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "server", true).TLSCertificate(t)},
			ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(), NextProtos: []string{"h2"}}
	}
	var gs rawxds.GRPCServer
	if transport == "grpc-go" {
		opts := server.GRPCOptions()
		if tlsCfg != nil {
			opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
		}
		gs = grpc.NewServer(opts...)
	} else {
		gs = h2grpc.NewServer(h2grpc.Options{Codec: server.Codec{}, TLS: tlsCfg})
	}
	srv.Register(gs)
	return &authzEnv{srv: srv, addr: rawxds.Serve(t, gs), ca: ca, insecure: plain}
}

// dial connects with client's certificate (none if nil).
func (e *authzEnv) dial(t *testing.T, client *testcerts.Issued) discovery.AggregatedDiscoveryServiceClient {
	return discovery.NewAggregatedDiscoveryServiceClient(e.conn(t, client))
}

// conn is dial's connection.
func (e *authzEnv) conn(t *testing.T, client *testcerts.Issued) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if !e.insecure {
		cfg := &tls.Config{RootCAs: e.ca.Pool(), ServerName: "localhost"}
		if client != nil {
			cfg.Certificates = []tls.Certificate{client.TLSCertificate(t)}
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// wantRefused checks that err is PermissionDenied saying msg.
func wantRefused(t *testing.T, err error, msg string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Fatalf("got %v, want PermissionDenied saying %q", err, msg)
	}
}

func TestAuthorize(t *testing.T) {
	for _, transport := range []string{"xdsd", "grpc-go"} {
		t.Run(transport, func(t *testing.T) { testAuthorize(t, transport) })
	}
}

func testAuthorize(t *testing.T, transport string) {
	e := startAuthz(t, transport, false)
	web := e.ca.IssueClient(t, "web-cn", []string{"spiffe://example.org/ns/prod/sa/web"}, []string{"web.example.org"})
	dns := e.ca.IssueClient(t, "", nil, []string{"host1.dns.example.org"})
	cn := e.ca.IssueClient(t, "cn-client", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), rawxds.Timeout)
	defer cancel()

	sotw := func(c discovery.AggregatedDiscoveryServiceClient, node *corev3.Node) (grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse], error) {
		t.Helper()
		s, err := c.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: cds}); err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		return s, err
	}

	// Allowed, by each kind of identity.
	webc := e.dial(t, &web)
	s, err := sotw(webc, rawxds.Node("web"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sotw(e.dial(t, &dns), rawxds.Node("dns-node")); err != nil {
		t.Fatal(err)
	}
	if _, err := sotw(e.dial(t, &cn), &corev3.Node{Id: "cn-node", Cluster: "edge"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range e.srv.Status() {
		ids = append(ids, st.Identity)
	}
	if strings.Join(ids, ",") != "spiffe://example.org/ns/prod/sa/web,host1.dns.example.org,cn-client" {
		t.Fatalf("the streams' identities: %q", ids)
	}

	// A later request naming another node changes nothing: the stream
	// keeps serving the first node, which its status shows.
	if err := s.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("db"), TypeUrl: eds, ResourceNames: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("a later request naming another node: %v", err)
	}
	if st := e.srv.Status()[0]; st.Node.GetId() != "web" || len(st.Types) != 2 {
		t.Fatalf("the stream after a request naming another node: %+v", st)
	}

	// Refused: nothing is sent, and the stream ends saying why.
	_, err = sotw(webc, rawxds.Node("db"))
	wantRefused(t, err, `identity "spiffe://example.org/ns/prod/sa/web" may not claim node "db"`)
	_, err = sotw(e.dial(t, &cn), &corev3.Node{Id: "cn-node", Cluster: "core"})
	wantRefused(t, err, `identity "cn-client" may not claim node "cn-node" in cluster "core"`)
	_, err = sotw(e.dial(t, nil), rawxds.Node("web"))
	wantRefused(t, err, "no client certificate")

	// Incremental, and the first request without a node.
	d, err := webc.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("db"), TypeUrl: cds}); err != nil {
		t.Fatal(err)
	}
	_, err = d.Recv()
	wantRefused(t, err, `may not claim node "db"`)
	_, err = sotw(webc, nil)
	wantRefused(t, err, `may not claim node ""`)

	// Fetch.
	fetch := clusterservice.NewClusterDiscoveryServiceClient(e.conn(t, &web))
	if _, err := fetch.FetchClusters(ctx, &discovery.DiscoveryRequest{Node: rawxds.Node("web")}); err != nil {
		t.Fatal(err)
	}
	_, err = fetch.FetchClusters(ctx, &discovery.DiscoveryRequest{Node: rawxds.Node("db")})
	wantRefused(t, err, `may not claim node "db"`)
	if got := e.srv.Refusals(); got != 6 {
		t.Fatalf("Refusals() = %d, want 6", got)
	}
	var b bytes.Buffer
	e.srv.WritePrometheus(&b)
	if !strings.Contains(b.String(), "xdsd_authz_denied_total 6\n") {
		t.Fatalf("metrics lack xdsd_authz_denied_total 6:\n%s", b.String())
	}
}

// TestAuthorizeWithoutTLS: with a policy, a client on a connection
// without TLS has no certificate, and is refused.
func TestAuthorizeWithoutTLS(t *testing.T) {
	e := startAuthz(t, "xdsd", true)
	s, err := e.dial(t, nil).StreamAggregatedResources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseSend()
	if err := s.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("web"), TypeUrl: cds}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	wantRefused(t, err, "no client certificate")
	if st := e.srv.Status(); len(st) != 0 {
		t.Fatalf("a refused stream stays in the status: %+v", st)
	}
}

// TestAuthorizeREST: REST requests are authorized each, over mutual TLS.
func TestAuthorizeREST(t *testing.T) {
	e := startAuthz(t, "xdsd", true) // its gRPC side unused
	web := e.ca.IssueClient(t, "", []string{"spiffe://example.org/ns/prod/sa/web"}, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: e.srv.RESTHandler(server.RESTConfig{PollTimeout: time.Second}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{e.ca.Issue(t, "server", true).TLSCertificate(t)},
			ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: e.ca.Pool()}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.ServeTLS(lis, "", "")
	}()
	defer func() {
		hs.Close()
		<-done
	}()
	post := func(client *testcerts.Issued, node string) (int, string) {
		t.Helper()
		cfg := &tls.Config{RootCAs: e.ca.Pool(), ServerName: "localhost"}
		if client != nil {
			cfg.Certificates = []tls.Certificate{client.TLSCertificate(t)}
		}
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		body, _ := protojson.Marshal(&discovery.DiscoveryRequest{Node: rawxds.Node(node)})
		resp, err := (&http.Client{Transport: tr}).Post("https://"+lis.Addr().String()+"/v3/discovery:clusters", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(&web, "web"); code != http.StatusOK || !strings.Contains(body, `"a"`) {
		t.Fatalf("allowed: %d %s", code, body)
	}
	if code, body := post(&web, "db"); code != http.StatusForbidden || !strings.Contains(body, `identity "spiffe://example.org/ns/prod/sa/web" may not claim node "db"`) {
		t.Fatalf("refused: %d %s", code, body)
	}
	if code, body := post(nil, "web"); code != http.StatusForbidden || !strings.Contains(body, "no client certificate") {
		t.Fatalf("no certificate: %d %s", code, body)
	}
	if got := e.srv.Refusals(); got != 2 {
		t.Fatalf("Refusals() = %d, want 2", got)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuthorizeLogBounded: refusals are logged a few a second at most,
// and the next line logged says how many were not.
func TestAuthorizeLogBounded(t *testing.T) {
	var logs syncBuffer
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("a")))
	e := rawxds.Start(t, c, server.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Authorize: func(context.Context, *corev3.Node) error { return errors.New("no") }})
	fetch := clusterservice.NewClusterDiscoveryServiceClient(e.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), rawxds.Timeout)
	defer cancel()
	calls := 0
	for !strings.Contains(logs.String(), "refusals_not_logged=") {
		_, err := fetch.FetchClusters(ctx, &discovery.DiscoveryRequest{Node: rawxds.Node("n")})
		wantRefused(t, err, "no") // an error without a status is PermissionDenied
		if calls++; ctx.Err() != nil {
			t.Fatalf("after %d refusals, no line says how many were not logged:\n%s", calls, logs.String())
		}
	}
	lines := strings.Count(logs.String(), "refused a client the node it claims")
	if lines >= calls || e.Server.Refusals() != uint64(calls) {
		t.Fatalf("%d refusals (counted %d), %d logged", calls, e.Server.Refusals(), lines)
	}
	t.Logf("%d refusals, %d logged", calls, lines)
}
