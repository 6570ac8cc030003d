package xdstest

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// backend is a grpc.testing.TestService that answers UnaryCall with its own
// listen address as server_id, and EmptyCall with an empty message.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	id string
}

func (b *backend) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

func (b *backend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: b.id, Hostname: b.id}, nil
}

// StartBackend starts a plaintext gRPC server on 127.0.0.1 (random port)
// serving grpc.testing.TestService (google.golang.org/grpc/interop/grpc_testing),
// and returns its "127.0.0.1:port" address, ready for [Endpoints].
//
// The backend identifies itself: UnaryCall answers with server_id (and
// hostname) set to addr, so a test learns which backend served an RPC; see
// [CallBackend]. EmptyCall also works; other methods are Unimplemented.
//
// stop stops the server at once (grpc.Server.Stop) and is idempotent; it is
// also registered with t.Cleanup, so calling it is only needed to take the
// backend down mid-test.
func StartBackend(t testing.TB) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("xdstest: backend listen: %v", err)
	}
	addr = lis.Addr().String()
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &backend{id: addr})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis) // returns nil after Stop
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Stop()
			<-done
		})
	}
	t.Cleanup(stop)
	return addr, stop
}

// CallBackend makes one UnaryCall on cc and returns the server_id of the
// backend that answered, i.e. the address [StartBackend] returned for it.
// Bound it with ctx.
//
// Without options the call is fail-fast: it waits while the channel is still
// resolving or connecting, but fails at once, with code UNAVAILABLE and the
// channel's error (e.g. the xDS NACK reason or "resource does not exist"),
// when the channel is in TRANSIENT_FAILURE. Pass grpc.WaitForReady(true) to
// wait out failures instead. When waiting for a given failure, poll: on a
// Listener or RouteConfiguration error grpc-go's resolver first pushes an
// empty config, so an RPC may briefly fail with "produced zero addresses"
// before the real reason is in place.
func CallBackend(ctx context.Context, cc grpc.ClientConnInterface, opts ...grpc.CallOption) (string, error) {
	resp, err := testgrpc.NewTestServiceClient(cc).UnaryCall(ctx,
		&testgrpc.SimpleRequest{FillServerId: true}, opts...)
	if err != nil {
		return "", err
	}
	return resp.GetServerId(), nil
}
