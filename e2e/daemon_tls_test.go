package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/testutil/testcerts"
)

// TLS and mutual TLS on the xDS port.

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
