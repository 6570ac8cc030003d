// Command hello shows traffic flowing through xdsd: it starts a gRPC backend
// and a proxyless gRPC client that finds that backend only through xDS.
//
// In one terminal serve the embedded example configuration (listener "hello"
// → route "hello" → cluster "hello" → endpoint 127.0.0.1:50051):
//
//	go run ./cmd/xdsd serve
//
// and in another:
//
//	go run ./examples/hello
//
// The backend is a grpc.testing.TestService on -backend-addr whose UnaryCall
// answers with its own address. The client dials "xds:///hello": grpc-go's
// xDS resolver asks xdsd (-xds-server) for the Listener "hello", follows it
// to the route, cluster and endpoints, and connects to the backend. Each
// call prints the backend that answered.
//
// -only-backend and -only-client run one half, e.g. the backend on another
// port (edit examples/config/endpoints/hello.yaml to match and serve with
// --config-dir examples/config: the client follows the change).
//
// The client's xDS bootstrap is built from -xds-server and -node. grpc-go
// reads GRPC_XDS_BOOTSTRAP and GRPC_XDS_BOOTSTRAP_CONFIG once, when the
// process starts (setting them with os.Setenv in main is too late), so when
// either is set in the environment it is used instead and the two flags are
// ignored.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds" // registers the "xds" resolver and balancers
)

// options are the command-line flags; run takes them.
type options struct {
	backendAddr string        // where the backend listens
	xdsServer   string        // xdsd's gRPC address
	node        string        // the client's xDS node id
	target      string        // what the client dials
	n           int           // how many calls the client makes
	interval    time.Duration // pause between calls
	onlyBackend bool          // run the backend only, until interrupted
	onlyClient  bool          // run the client only
	envBoot     bool          // use grpc-go's GRPC_XDS_BOOTSTRAP* environment variables
	out         io.Writer     // where progress is printed
}

func main() {
	var o options
	flag.StringVar(&o.backendAddr, "backend-addr", "127.0.0.1:50051", "backend listen address (the example configuration's endpoint)")
	flag.StringVar(&o.xdsServer, "xds-server", "localhost:18000", "xdsd's xDS address")
	flag.StringVar(&o.node, "node", "hello-client", "xDS node id of the client")
	flag.StringVar(&o.target, "target", "xds:///hello", "target the client dials")
	flag.IntVar(&o.n, "n", 5, "number of calls")
	flag.DurationVar(&o.interval, "interval", time.Second, "pause between calls")
	flag.BoolVar(&o.onlyBackend, "only-backend", false, "run only the backend, until interrupted")
	flag.BoolVar(&o.onlyClient, "only-client", false, "run only the client")
	flag.Parse()
	o.envBoot = os.Getenv("GRPC_XDS_BOOTSTRAP") != "" || os.Getenv("GRPC_XDS_BOOTSTRAP_CONFIG") != ""
	o.out = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}

// run starts the backend and/or the client as o says, and returns when the
// client is done (or, with only the backend, when ctx ends).
func run(ctx context.Context, o options) error {
	if o.onlyBackend && o.onlyClient {
		return errors.New("-only-backend and -only-client exclude each other")
	}
	if !o.onlyClient {
		addr, stop, err := startBackend(o.backendAddr)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(o.out, "backend listening on %s\n", addr)
		if o.onlyBackend {
			<-ctx.Done()
			return nil
		}
	}
	return runClient(ctx, o)
}

// backend is a grpc.testing.TestService whose UnaryCall answers with the
// backend's address, so the client sees who served it.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	addr string
}

// UnaryCall answers with server_id set to the backend's address.
func (b *backend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: b.addr}, nil
}

// startBackend serves the backend on addr and returns the address it
// listens on; stop stops it and waits until it is done.
func startBackend(addr string) (bound string, stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("backend: %w", err)
	}
	bound = lis.Addr().String()
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &backend{addr: bound})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis) // returns after Stop
	}()
	return bound, func() { srv.Stop(); <-done }, nil
}

// bootstrap returns grpc-go's xDS bootstrap JSON: one management server,
// xdsd on xdsServer without TLS, and the client's node id.
func bootstrap(xdsServer, node string) []byte {
	b, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":    xdsServer,
			"channel_creds": []any{map[string]string{"type": "insecure"}},
		}},
		"node": map[string]string{"id": node},
	})
	return b
}

// runClient dials o.target through xDS and makes o.n calls, o.interval
// apart, printing which backend answered each.
func runClient(ctx context.Context, o options) error {
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if !o.envBoot {
		// An xDS resolver of its own, configured with our bootstrap. The
		// API is marked experimental and for testing, but it is grpc-go's
		// only way to pass a bootstrap without the environment.
		rb, err := xds.NewXDSResolverWithConfigForTesting(bootstrap(o.xdsServer, o.node))
		if err != nil {
			return fmt.Errorf("xDS resolver: %w", err)
		}
		dialOpts = append(dialOpts, grpc.WithResolvers(rb))
	}
	cc, err := grpc.NewClient(o.target, dialOpts...)
	if err != nil {
		return err
	}
	defer cc.Close() // also closes the xDS client and its stream to xdsd
	via := "xdsd at " + o.xdsServer
	if o.envBoot {
		via = "the bootstrap in GRPC_XDS_BOOTSTRAP(_CONFIG)"
	}
	fmt.Fprintf(o.out, "client dialing %s through %s\n", o.target, via)
	if err := waitReady(ctx, o.out, cc); err != nil {
		return err
	}
	client := testgrpc.NewTestServiceClient(cc)

	failed := 0
	for i := 1; i <= o.n; i++ {
		if i > 1 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(o.interval):
			}
		}
		// WaitForReady: if the backend goes away, wait for it (up to
		// 10 s) rather than fail at once.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := client.UnaryCall(cctx, &testgrpc.SimpleRequest{FillServerId: true}, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			failed++
			fmt.Fprintf(o.out, "call %d/%d failed: %v\n", i, o.n, err)
			continue
		}
		fmt.Fprintf(o.out, "call %d/%d answered by backend %s\n", i, o.n, resp.GetServerId())
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d calls failed", failed, o.n)
	}
	return nil
}

// waitReady connects cc and waits, for up to 30 s, until it is READY: xdsd
// has answered with the listener, route, cluster and endpoints, and the
// backend is connected. Waiting here rather than in the first call matters
// when xdsd is not up yet: grpc-go then starts that call without an xDS
// route, and it fails with "unknown cluster selected for RPC" once the
// configuration arrives.
func waitReady(parent context.Context, out io.Writer, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			if parent.Err() != nil {
				return parent.Err() // interrupted
			}
			return fmt.Errorf("channel still %v after 30 s (is `xdsd serve` running, and the backend where its endpoints say?)", s)
		}
		if s := cc.GetState(); s != connectivity.Ready {
			fmt.Fprintf(out, "channel %v\n", s)
		}
	}
	return nil
}
