package xdstest

import (
	"encoding/json"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/xds" // also registers the xDS resolver, balancers and HTTP filters
)

// Server features grpc-go v1.85 understands in a bootstrap's
// xds_servers[].server_features. Any other string is ignored; "xds_v3" is no
// longer needed (grpc-go speaks only v3).
const (
	// FeatureIgnoreResourceDeletion makes grpc-go keep using a Listener or
	// Cluster that a state-of-the-world response stops listing, instead of
	// treating it as deleted (gRFC A53).
	FeatureIgnoreResourceDeletion = "ignore_resource_deletion"
	// FeatureTrustedXDSServer lets the server send security-sensitive fields
	// (gRFC A81); harmless for these tests.
	FeatureTrustedXDSServer = "trusted_xds_server"
)

type bootstrapServer struct {
	ServerURI      string           `json:"server_uri"`
	ChannelCreds   []map[string]any `json:"channel_creds"`
	ServerFeatures []string         `json:"server_features,omitempty"`
}

type bootstrapNode struct {
	ID string `json:"id"`
}

type bootstrapConfig struct {
	XDSServers []bootstrapServer `json:"xds_servers"`
	Node       bootstrapNode     `json:"node"`
}

// Bootstrap returns grpc-go bootstrap JSON that points the xDS client at the
// management server on serverAddr ("host:port", plaintext) and identifies the
// client as node nodeID. It sets no server features; see
// [BootstrapWithFeatures].
//
// The server URI is "passthrough:///serverAddr", so the xDS client's own
// channel does not go through the DNS resolver. channel_creds is mandatory in
// grpc-go (an empty list is a bootstrap error); "insecure" is used.
func Bootstrap(serverAddr, nodeID string) string {
	return BootstrapWithFeatures(serverAddr, nodeID)
}

// BootstrapWithFeatures is [Bootstrap] with the given server_features, e.g.
// [FeatureIgnoreResourceDeletion].
func BootstrapWithFeatures(serverAddr, nodeID string, features ...string) string {
	return bootstrap(serverAddr, nodeID, map[string]any{"type": "insecure"}, features)
}

// BootstrapTLS is [Bootstrap] for a management server that serves mutual
// TLS: channel_creds of type "tls" (gRFC A65), which trusts the CA
// certificates of caFile and presents the certificate of certFile with
// the key of keyFile, all PEM files that grpc-go's file watcher rereads.
func BootstrapTLS(serverAddr, nodeID, caFile, certFile, keyFile string) string {
	return bootstrap(serverAddr, nodeID, map[string]any{"type": "tls", "config": map[string]string{
		"ca_certificate_file": caFile, "certificate_file": certFile, "private_key_file": keyFile}}, nil)
}

func bootstrap(serverAddr, nodeID string, creds map[string]any, features []string) string {
	b, err := json.MarshalIndent(bootstrapConfig{
		XDSServers: []bootstrapServer{{
			ServerURI:      "passthrough:///" + serverAddr,
			ChannelCreds:   []map[string]any{creds},
			ServerFeatures: features,
		}},
		Node: bootstrapNode{ID: nodeID},
	}, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("xdstest: marshal bootstrap: %v", err))
	}
	return string(b)
}

// ResolverBuilder returns an "xds" resolver builder that uses bootstrapJSON
// instead of the GRPC_XDS_BOOTSTRAP / GRPC_XDS_BOOTSTRAP_CONFIG environment
// variables, via the public (experimental, testing-only)
// xds.NewXDSResolverWithConfigForTesting of grpc-go.
//
// Every ClientConn built with it gets its own xDS client (its own pool), so
// tests may run in parallel with different bootstraps, and the xDS client
// and its ADS stream are closed when that ClientConn closes. The bootstrap is
// only parsed when a ClientConn builds the resolver, so a bad one shows up as
// a failed RPC, not here.
func ResolverBuilder(bootstrapJSON string) (resolver.Builder, error) {
	return xds.NewXDSResolverWithConfigForTesting([]byte(bootstrapJSON))
}

// NewClient returns a ClientConn for target (e.g. "xds:///my-listener") that
// resolves through grpc-go's xDS client configured by bootstrapJSON (see
// [ResolverBuilder]) and uses plaintext to the backends. opts are appended
// after those two options. The caller closes the ClientConn.
//
// grpc.NewClient does not connect: the ADS stream opens on the first RPC or
// on Connect().
func NewClient(target, bootstrapJSON string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	rb, err := ResolverBuilder(bootstrapJSON)
	if err != nil {
		return nil, fmt.Errorf("xdstest: xDS resolver: %w", err)
	}
	all := append([]grpc.DialOption{
		grpc.WithResolvers(rb),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	cc, err := grpc.NewClient(target, all...)
	if err != nil {
		return nil, fmt.Errorf("xdstest: grpc.NewClient(%q): %w", target, err)
	}
	return cc, nil
}

// Dial is [NewClient] for tests: it fails t on error and closes the
// ClientConn in t.Cleanup. Closing is synchronous: once ClientConn.Close
// returns, the resolver, and with it the xDS client, its ADS stream and its
// channel to the management server, are closed (see [LeakOptions] for what
// is left).
func Dial(t testing.TB, target, bootstrapJSON string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := NewClient(target, bootstrapJSON, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
