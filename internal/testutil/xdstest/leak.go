package xdstest

import (
	"testing"

	"go.uber.org/goleak"
)

// LeakOptions returns the goleak options for tests that run grpc-go xDS
// clients built by [NewClient] or [Dial]. With grpc-go v1.85 it ignores
// one goroutine, and only for a bootstrap with channel_creds of type "tls"
// ([BootstrapTLS]): the file watcher of its certificate provider
// (pemfile.(*watcher).run), which grpc-go starts for the xDS client's
// transport and never stops (internal/xds/xdsclient/clientimpl.go,
// populateGRPCTransportConfigsFromServerConfig, drops the credentials'
// cleanup function). Otherwise:
//
//   - The xDS client has no close grace period in v1.85: the pool closes it
//     when its last reference goes, and the resolver drops that reference in
//     Close. ClientConn.Close runs resolver.Close and waits for it, and
//     xDS client Close closes the ADS stream, the channel to the management
//     server and waits for its own serializer. So once ClientConn.Close
//     returns, no xDS-client goroutine is left, with the management server
//     up or down.
//   - Each [NewClient] ClientConn has its own pool (xds.NewXDSResolverWithConfigForTesting),
//     so no process-global xDS client outlives a test. The global pool
//     (env-var bootstrap) is never touched.
//   - What can linger for a few milliseconds are transport goroutines of
//     connections just torn down (grpcsync.(*CallbackSerializer).run,
//     (*addrConn).resetTransportAndUnlock, server-side
//     transport.(*controlBuffer).get and (*http2Server).keepalive), e.g. when
//     the management server was stopped before the client. goleak.VerifyNone
//     retries for about half a second before failing, which covers them, so
//     no IgnoreTopFunction is needed.
//
// What a test must do to end clean: close every ClientConn ([Dial] does it in
// t.Cleanup), stop every gRPC server it started with Stop or GracefulStop and
// wait for Serve to return ([StartBackend] does it in t.Cleanup), and check
// for leaks only after those cleanups, i.e. with [VerifyNoLeaks] called first
// in the test, or in TestMain:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, xdstest.LeakOptions()...) }
//
// Anything goleak then reports is a real leak, most likely in the server
// under test (e.g. a stream handler goroutine that did not return).
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("google.golang.org/grpc/credentials/tls/certprovider/pemfile.(*watcher).run"),
	}
}

// VerifyNoLeaks registers a t.Cleanup that fails t if goroutines are left
// over, with [LeakOptions]. Call it first in the test, so that its cleanup
// runs last, after the ClientConns, backends and servers registered later are
// closed (cleanups run last-registered first). Not for parallel tests: it
// sees the goroutines of every running test; use goleak.VerifyTestMain there.
func VerifyNoLeaks(t testing.TB) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t, LeakOptions()...) })
}
