package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// echoADS answers each SotW request with a response whose version is the
// number of names requested and whose nonce is nonceLen bytes long; a
// request naming "fail" ends the stream with an error.
type echoADS struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	nonceLen int
}

func (e echoADS) StreamAggregatedResources(s discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		if len(req.GetResourceNames()) == 1 && req.GetResourceNames()[0] == "fail" {
			return status.Error(codes.FailedPrecondition, "asked to fail")
		}
		if err := s.Send(&discovery.DiscoveryResponse{
			VersionInfo: strconv.Itoa(len(req.GetResourceNames())),
			Nonce:       strings.Repeat("n", e.nonceLen),
		}); err != nil {
			return err
		}
	}
}

// TestH2StreamFlowControl runs h2Stream against grpc-go's server with the
// smallest windows, sending requests and receiving responses each larger
// than a window, some requests sent back to back before their responses
// are read: both sides must wait for credit and give it.
func TestH2StreamFlowControl(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.InitialWindowSize(65535), grpc.InitialConnWindowSize(65535))
	discovery.RegisterAggregatedDiscoveryServiceServer(gs, echoADS{nonceLen: 150_000})
	go func() { _ = gs.Serve(lis) }() // ends with gs.Stop
	defer gs.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var read atomic.Int64
	st, err := dialH2[*discovery.DiscoveryRequest](ctx, lis.Addr().String(), sotwPath, 65535, &read, newSotWResponse)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	names := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("resource-%011d", i) // 20 bytes
		}
		return s
	}
	for round := range 3 {
		sizes := []int{5000, 7000} // 100 and 140 KB
		for _, n := range sizes {
			if err := st.Send(&discovery.DiscoveryRequest{TypeUrl: clusterTypeURL, ResourceNames: names(n)}); err != nil {
				t.Fatalf("round %d: Send: %v", round, err)
			}
		}
		for _, n := range sizes {
			resp, err := st.Recv()
			if err != nil {
				t.Fatalf("round %d: Recv: %v", round, err)
			}
			if resp.GetVersionInfo() != strconv.Itoa(n) || len(resp.GetNonce()) != 150_000 {
				t.Fatalf("round %d: response version %q, nonce of %d bytes; want %d, 150000", round, resp.GetVersionInfo(), len(resp.GetNonce()), n)
			}
		}
	}
	if read.Load() < 6*150_000 {
		t.Errorf("%d bytes counted, want at least %d", read.Load(), 6*150_000)
	}
	// A request that does not encode is not sent, and queues nothing.
	if err := st.Send(&discovery.DiscoveryRequest{TypeUrl: "\xff"}); err == nil {
		t.Fatal("Send of a request with invalid UTF-8: no error")
	}
	if err := st.Send(&discovery.DiscoveryRequest{ResourceNames: names(2)}); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || resp.GetVersionInfo() != "2" {
		t.Fatalf("after a failed Send: response version %q, %v; want the next request's, 2", resp.GetVersionInfo(), err)
	}
	// The server's error reaches Recv.
	if err := st.Send(&discovery.DiscoveryRequest{ResourceNames: []string{"fail"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err == nil || !strings.Contains(err.Error(), "asked to fail") {
		t.Fatalf("Recv after the server failed the stream: %v, want its message", err)
	}
}
