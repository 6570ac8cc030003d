package xdstest

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// fakeADS is a throwaway state-of-the-world ADS server: for each type URL it
// answers a request whose resource names differ from the last ones it
// answered on that stream with the matching resources it holds. ACKs and
// NACKs (same names again) get no answer; every request is recorded.
type fakeADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer

	resources map[string]map[string]proto.Message // fixed before start

	mu      sync.Mutex
	reqs    []*discoveryv3.DiscoveryRequest
	changed chan struct{} // closed and replaced on every request
}

func (f *fakeADS) StreamAggregatedResources(stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	answered := map[string]string{} // type URL -> sorted names answered
	nonce := 0
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()

		names := slices.Clone(req.GetResourceNames())
		slices.Sort(names)
		key := strings.Join(names, "\x00")
		if prev, ok := answered[req.GetTypeUrl()]; ok && prev == key {
			continue // ACK or NACK of what we sent
		}
		answered[req.GetTypeUrl()] = key
		nonce++
		resp := &discoveryv3.DiscoveryResponse{
			VersionInfo: "1",
			TypeUrl:     req.GetTypeUrl(),
			Nonce:       strconv.Itoa(nonce),
		}
		for _, n := range names {
			m, ok := f.resources[req.GetTypeUrl()][n]
			if !ok {
				continue
			}
			a, err := anypb.New(m)
			if err != nil {
				return err
			}
			resp.Resources = append(resp.Resources, a)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// requests returns a copy of the requests received so far.
func (f *fakeADS) requests() []*discoveryv3.DiscoveryRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// waitRequest returns the first request received so far or later that
// matches, or fails t when ctx ends first.
func (f *fakeADS) waitRequest(ctx context.Context, t *testing.T, what string, match func(*discoveryv3.DiscoveryRequest) bool) *discoveryv3.DiscoveryRequest {
	t.Helper()
	for {
		f.mu.Lock()
		reqs, changed := f.reqs, f.changed
		f.mu.Unlock()
		if i := slices.IndexFunc(reqs, match); i >= 0 {
			return reqs[i]
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; requests: %v", what, ctx.Err(), reqs)
		}
	}
}

// startFakeADS serves resources on 127.0.0.1 and returns the address and an
// idempotent stop, which t.Cleanup also calls.
func startFakeADS(t *testing.T, resources map[string]map[string]proto.Message) (*fakeADS, string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeADS{resources: resources, changed: make(chan struct{})}
	srv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Stop()
			<-done
		})
	}
	t.Cleanup(stop)
	return f, lis.Addr().String(), stop
}

func TestEndToEnd(t *testing.T) {
	VerifyNoLeaks(t)

	addrA, _ := StartBackend(t)
	addrB, _ := StartBackend(t)
	const target = "svc.example"
	res := DefaultResources(target, addrA, addrB)
	ads, adsAddr, _ := startFakeADS(t, res.ByType())

	cc := Dial(t, "xds:///"+target, Bootstrap(adsAddr, "test-node"))

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < 2 {
		id, err := CallBackend(ctx, cc)
		if err != nil {
			t.Fatalf("CallBackend: %v (seen %v)", err, seen)
		}
		if id != addrA && id != addrB {
			t.Fatalf("CallBackend answered by %q, want %q or %q", id, addrA, addrB)
		}
		seen[id] = true
	}

	// The first request carries the node, and every type gets ACKed (a
	// request with the version we sent and no error). The EDS ACK may
	// still be in flight when the RPC succeeds, hence the wait.
	if got := ads.requests()[0].GetNode().GetId(); got != "test-node" {
		t.Errorf("node id = %q, want test-node", got)
	}
	for _, typ := range []string{ListenerType, RouteConfigType, ClusterType, EndpointsType} {
		ads.waitRequest(ctx, t, "ACK of "+typ, func(r *discoveryv3.DiscoveryRequest) bool {
			return r.GetTypeUrl() == typ && r.GetVersionInfo() == "1" && r.GetErrorDetail() == nil
		})
	}
}

func TestNack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(*Resources)
		typeURL  string
		typeName string
		resName  string
		reason   string
	}{{
		name: "listener",
		mutate: func(r *Resources) {
			r.Listener = NackListener(r.Listener.GetName(), r.RouteConfig.GetName())
		},
		typeURL:  ListenerType,
		typeName: "ListenerResource",
		resName:  "svc.example",
		reason:   NackListenerReason,
	}, {
		name: "cluster",
		mutate: func(r *Resources) {
			r.Cluster = NackCluster(r.Cluster.GetName(), "")
		},
		typeURL:  ClusterType,
		typeName: "ClusterResource",
		resName:  "cluster-svc.example",
		reason:   NackClusterReason,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			VerifyNoLeaks(t)

			addr, _ := StartBackend(t)
			const target = "svc.example"
			res := DefaultResources(target, addr)
			tc.mutate(&res)
			ads, adsAddr, _ := startFakeADS(t, res.ByType())
			cc := Dial(t, "xds:///"+target, Bootstrap(adsAddr, "test-node"))

			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			// A fail-fast RPC blocks while the channel resolves, then
			// fails with the NACK text once it is in TRANSIENT_FAILURE.
			// Poll: on a listener error the xDS resolver first pushes an
			// empty config ("produced zero addresses"), then the error.
			var err error
			for ctx.Err() == nil {
				_, err = CallBackend(ctx, cc)
				if err == nil || strings.Contains(err.Error(), tc.reason) {
					break
				}
			}
			t.Logf("RPC error: %v", err)
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("RPC error %v, want UNAVAILABLE containing %q", err, tc.reason)
			}

			nack := ads.waitRequest(ctx, t, "NACK", func(r *discoveryv3.DiscoveryRequest) bool {
				return r.GetTypeUrl() == tc.typeURL && r.GetErrorDetail() != nil
			})
			ed := nack.GetErrorDetail()
			t.Logf("NACK: version_info=%q nonce=%q code=%d message=%q", nack.GetVersionInfo(), nack.GetResponseNonce(), ed.GetCode(), ed.GetMessage())
			if ed.GetCode() != int32(codes.InvalidArgument) {
				t.Errorf("NACK code = %d, want %d", ed.GetCode(), codes.InvalidArgument)
			}
			wantPrefix := `error parsing "` + tc.typeName + `" response: resource "` + tc.resName + `": ` + tc.reason
			if !strings.HasPrefix(ed.GetMessage(), wantPrefix) {
				t.Errorf("NACK message = %q, want prefix %q", ed.GetMessage(), wantPrefix)
			}
			if nack.GetVersionInfo() != "" {
				t.Errorf("NACK version_info = %q, want empty (nothing accepted before)", nack.GetVersionInfo())
			}
		})
	}
}

// TestManagementServerGoneFirst stops the management server while the client
// is connected, so the xDS client is backing off and redialing when the
// ClientConn closes; LeakOptions must still be enough.
func TestManagementServerGoneFirst(t *testing.T) {
	VerifyNoLeaks(t)

	addr, _ := StartBackend(t)
	const target = "svc.example"
	_, adsAddr, stopADS := startFakeADS(t, DefaultResources(target, addr).ByType())
	cc := Dial(t, "xds:///"+target, Bootstrap(adsAddr, "test-node"))

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if id, err := CallBackend(ctx, cc); err != nil || id != addr {
		t.Fatalf("CallBackend = %q, %v; want %q", id, err, addr)
	}
	stopADS()
	// grpc-go keeps using the resources it has: RPCs still succeed.
	if id, err := CallBackend(ctx, cc); err != nil || id != addr {
		t.Fatalf("CallBackend after ADS stop = %q, %v; want %q", id, err, addr)
	}
}
