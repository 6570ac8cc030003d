package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/internal/testutil/stacks"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// grpcMaxRecv is gRPC's default limit on a received message, which xdsd's
// server keeps.
const grpcMaxRecv = 4 << 20

// Full method names for streams opened with a raw codec.
const (
	adsSotwMethod  = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	adsDeltaMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
	cdsSotwMethod  = "/envoy.service.cluster.v3.ClusterDiscoveryService/StreamClusters"
)

// unknownTypeURLs are type URLs xdsd does not serve.
var unknownTypeURLs = []string{
	"type.googleapis.com/xdsd.test.NoSuchType",
	"type.googleapis.com/envoy.api.v2.Cluster", // v2: not served
	"envoy.config.cluster.v3.Cluster",          // no type.googleapis.com/ prefix
	"type.googleapis.com/envoy.config.cluster.v3.Cluster\x00",
}

// witness is a pair of ADS streams (SotW and delta) opened before a hostile
// act and subscribed to the endpoints "w". bump publishes a change to "w"
// and checks that both streams get it: the hostile act disturbed nobody.
type witness struct {
	e     *rawxds.Env
	base  []*resource.Resource
	port  uint32
	sotw  *rawxds.SotW
	delta *rawxds.Delta
}

// robustEnv starts a server publishing the cluster and endpoints "c1", the
// listener "l1" and the witness's endpoints "w", and opens the witness.
func robustEnv(t *testing.T) (*rawxds.Env, *witness) {
	t.Helper()
	w := &witness{
		base: []*resource.Resource{rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.Listener("l1", 80)},
		port: 1,
	}
	c := cache.New(nil)
	c.SetSnapshot("", w.snapshot())
	w.e = rawxds.Start(t, c, server.Config{})

	w.sotw = w.e.ADS(t)
	w.sotw.Send(&discovery.DiscoveryRequest{Node: rawxds.Node("witness"), TypeUrl: eds, ResourceNames: []string{"w"}})
	r := w.sotw.Recv()
	wantNames(t, r, "w")
	w.sotw.Send(ack(r, "w"))

	w.delta = w.e.DeltaADS(t)
	w.delta.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("witness"), TypeUrl: eds, ResourceNamesSubscribe: []string{"w"}})
	d := w.delta.Recv()
	wantDeltaNames(t, d, "w")
	w.delta.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: d.Nonce})
	return w.e, w
}

func (w *witness) snapshot() *cache.Snapshot {
	return cache.MustSnapshot(append(slices.Clone(w.base), rawxds.Endpoints("w", w.port))...)
}

// bump publishes a new version of "w" and checks that both witness streams
// receive it (and ACKs it).
func (w *witness) bump(t *testing.T) {
	t.Helper()
	w.port++
	w.e.Cache.SetSnapshot("", w.snapshot())
	r := w.sotw.Recv()
	if r.TypeUrl != eds {
		t.Fatalf("witness got a %s response, want %s", r.TypeUrl, eds)
	}
	wantNames(t, r, "w")
	w.sotw.Send(ack(r, "w"))
	d := w.delta.Recv()
	wantDeltaNames(t, d, "w")
	w.delta.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: d.Nonce})
}

// wantDeltaNames checks the names of a delta response's resources.
func wantDeltaNames(t *testing.T, resp *discovery.DeltaDiscoveryResponse, want ...string) {
	t.Helper()
	sameNames(t, resp.GetTypeUrl()+" delta response", rawxds.DeltaNames(resp), want)
}

// wantCode checks that err is a gRPC status with code c.
func wantCode(t *testing.T, err error, c codes.Code) {
	t.Helper()
	if got := status.Code(err); got != c {
		t.Fatalf("stream ended with %v, want code %v", err, c)
	}
}

// lastErrors returns the LastError of every open stream that has one.
func lastErrors(e *rawxds.Env) []string {
	var out []string
	for _, s := range e.Server.Status() {
		if s.LastError != "" {
			out = append(out, s.LastError)
		}
	}
	return out
}

// manyNames returns n distinct resource names, none of which exists.
func manyNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%06d", prefix, i)
	}
	return out
}

// sizedRequest returns an EDS request for "c1" padded with other names to
// exactly size encoded bytes.
func sizedRequest(t *testing.T, size int) *discovery.DiscoveryRequest {
	t.Helper()
	r := &discovery.DiscoveryRequest{Node: rawxds.Node("big"), TypeUrl: eds, ResourceNames: []string{"c1"}}
	pad := strings.Repeat("p", 1000)
	for n, i := proto.Size(r), 0; n < size-2000; i++ {
		name := fmt.Sprintf("%06d-%s", i, pad)
		r.ResourceNames = append(r.ResourceNames, name)
		n += 1 + protowire.SizeVarint(uint64(len(name))) + len(name)
	}
	r.ResourceNames = append(r.ResourceNames, "")
	last := len(r.ResourceNames) - 1
	for range 8 {
		diff := size - proto.Size(r)
		if diff == 0 {
			return r
		}
		r.ResourceNames[last] = strings.Repeat("f", len(r.ResourceNames[last])+diff)
	}
	t.Fatalf("cannot build a request of exactly %d bytes (got %d)", size, proto.Size(r))
	return nil
}

// rawCodec sends and receives messages as raw bytes, so a test can put
// frames on the wire that are not valid DiscoveryRequests. It names itself
// "proto" so the server decodes the frames with its proto codec.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// sendRawFrames opens a stream on method, sends frames as raw gRPC
// messages and returns the error the stream ends with.
func sendRawFrames(t *testing.T, conn *grpc.ClientConn, method string, frames ...[]byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rawxds.Timeout)
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := cs.SendMsg(f); err != nil {
			break // the server may already have closed the stream
		}
	}
	for {
		var b []byte
		if err := cs.RecvMsg(&b); err != nil {
			return err
		}
	}
}

// bigEndpoints returns a ClusterLoadAssignment named name of about size
// bytes, most of them endpoint metadata (cheap to encode and decode, so the
// test measures waiting, not parsing); salt changes its content.
func bigEndpoints(name string, size, salt int) *resource.Resource {
	const n = 8
	eps := make([]*endpointv3.LbEndpoint, n)
	for i := range eps {
		md, err := structpb.NewStruct(map[string]any{"pad": strings.Repeat(string(rune('a'+(salt+i)%26)), size/n)})
		if err != nil {
			panic(err)
		}
		eps[i] = &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address:       fmt.Sprintf("10.0.%d.%d", salt%256, i),
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
				}}},
			}},
			Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"xdsd.test": md}},
		}
	}
	return resource.MustNew(&endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints:   []*endpointv3.LocalityLbEndpoints{{LbEndpoints: eps}},
	})
}

// bigRoute returns a route configuration named name with n virtual hosts.
func bigRoute(name string, n int) *resource.Resource {
	vhs := make([]*routev3.VirtualHost, n)
	for i := range vhs {
		vhs[i] = &routev3.VirtualHost{
			Name:    fmt.Sprintf("vh-%05d", i),
			Domains: []string{fmt.Sprintf("host-%05d.example.com", i)},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c1"}}},
			}},
		}
	}
	return resource.MustNew(&routev3.RouteConfiguration{Name: name, VirtualHosts: vhs})
}

// sendBlocked reports whether some goroutine of the server is blocked in
// a stream's send waiting for HTTP/2 flow control (gRPC's write quota).
func sendBlocked() bool {
	for _, g := range stacks.All() {
		// grpc-go's transport waits for write quota; h2grpc for window.
		if strings.Contains(g, "server.(*stream).send(") &&
			(strings.Contains(g, "writeQuota") || strings.Contains(g, "sync.(*Cond).Wait")) {
			return true
		}
	}
	return false
}

// heapAlloc returns the live heap after two collections.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestRobust(t *testing.T) {
	t.Run("R1_unknown_type_url_on_ads_is_ignored", func(t *testing.T) {
		e, w := robustEnv(t)
		s := e.ADS(t)
		s.Send(req(cds))
		r := s.Recv()
		wantNames(t, r, "c1")
		s.Send(ack(r))
		for _, u := range unknownTypeURLs {
			s.Send(req(u, "c1"))
		}
		// The stream's other types keep working: the next response is EDS.
		s.Send(req(eds, "c1"))
		r = s.Recv()
		if r.TypeUrl != eds {
			t.Fatalf("got a %s response, want %s", r.TypeUrl, eds)
		}
		wantNames(t, r, "c1")
		s.Send(ack(r, "c1"))
		if errs := lastErrors(e); len(errs) != 1 || !strings.Contains(errs[0], unknownTypeURLs[len(unknownTypeURLs)-1]) {
			t.Fatalf("LastError of streams = %q, want one naming %q", errs, unknownTypeURLs[len(unknownTypeURLs)-1])
		}

		d := e.DeltaADS(t)
		for _, u := range unknownTypeURLs {
			d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: u, ResourceNamesSubscribe: []string{"c1"}})
		}
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"c1"}})
		dr := d.Recv()
		if dr.TypeUrl != eds {
			t.Fatalf("got a %s delta response, want %s", dr.TypeUrl, eds)
		}
		wantDeltaNames(t, dr, "c1")
		waitFor(t, func() bool { return len(lastErrors(e)) == 2 })
		w.bump(t)
	})

	// What a client sends (type URLs, NACK messages, its node id) is
	// logged cut to a bound, and an unknown type once per stream: a
	// client sending 200,000 such requests wrote 200,000 log lines.
	t.Run("R1_client_text_in_logs_is_bounded", func(t *testing.T) {
		logs := &logRecorder{}
		c := cache.New(nil)
		c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1)))
		e := rawxds.Start(t, c, server.Config{Logger: slog.New(logs.handler())})
		long := strings.Repeat("x", 100<<10)
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: rawxds.Node(long), TypeUrl: "type.googleapis.com/" + long})
		for i := range 50 {
			s.Send(&discovery.DiscoveryRequest{TypeUrl: fmt.Sprint("type.googleapis.com/nothing.", i)})
		}
		s.Send(req(cds))
		r := s.Recv()
		s.Send(&discovery.DiscoveryRequest{TypeUrl: cds, ResponseNonce: r.Nonce, ErrorDetail: &rpcstatus.Status{Code: 3, Message: long}})
		waitFor(t, func() bool { return logs.count("NACK") == 1 })
		if n := logs.count("ignoring request for unknown type"); n != 1 {
			t.Errorf("%d log lines for unknown types on one stream, want 1", n)
		}
		if n := logs.longest(); n > 8<<10 {
			t.Errorf("a log line of %d bytes: the client's text is not cut", n)
		}
		if m := streamTypeStatus(t, e, long, "ads/sotw", cds).NackMessage; len(m) > 2<<10 {
			t.Errorf("Status holds a NACK message of %d bytes", len(m))
		}
	})

	// A client's NACK may quote the configuration it rejects: a PEM
	// private key in it is neither logged nor shown in Status.
	t.Run("R1_private_keys_in_NACK_messages_are_redacted", func(t *testing.T) {
		logs := &logRecorder{}
		c := cache.New(nil)
		c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1)))
		e := rawxds.Start(t, c, server.Config{Logger: slog.New(logs.handler())})
		const keyBody = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg"
		msg := `Proto constraint validation failed: private_key { inline_string: "-----BEGIN PRIVATE KEY-----\n` + keyBody + `\n-----END PRIVATE KEY-----\n" }`
		s := e.ADS(t)
		s.Send(req(cds))
		r := s.Recv()
		s.Send(nack(r, "", msg))
		waitFor(t, func() bool { return logs.count("NACK") == 1 })
		if logs.contains(keyBody) || !logs.contains("[redacted]") {
			t.Errorf("the NACK's log line shows the private key, or not [redacted]: %q", logs.texts)
		}
		if m := typeStatus(t, e, cds).NackMessage; strings.Contains(m, keyBody) || !strings.Contains(m, "inline_string: \"[redacted]") {
			t.Errorf("Status shows the NACK message %q", m)
		}
	})

	t.Run("R1_garbage_fields_on_ads", func(t *testing.T) {
		e, w := robustEnv(t)
		s := e.ADS(t)
		// No node at all, an empty type URL, nonsense version and nonce on
		// a first request, odd names: none of it may hurt.
		s.Send(&discovery.DiscoveryRequest{TypeUrl: "", ResourceNames: []string{"c1"}, VersionInfo: "v?", ResponseNonce: "n?"})
		s.Send(&discovery.DiscoveryRequest{TypeUrl: "", ErrorDetail: &rpcstatus.Status{Code: 13, Message: "x"}})
		waitFor(t, func() bool { return len(lastErrors(e)) == 1 })
		odd := []string{"", "\x00", "c1", strings.Repeat("n", 64<<10), "ü/\u202e", "c1"}
		s.Send(&discovery.DiscoveryRequest{TypeUrl: eds, ResourceNames: odd, VersionInfo: "not-a-version", ResponseNonce: "no-such-nonce",
			ErrorDetail: &rpcstatus.Status{Code: 3, Message: "nack of nothing"}})
		r := s.Recv()
		wantNames(t, r, "c1")
		s.Send(ack(r, odd...))
		// error_detail with a nonce the server never sent is no NACK.
		if ts := streamTypeStatus(t, e, "", "ads/sotw", eds); ts.NackedVersion != "" || ts.NackMessage != "" {
			t.Fatalf("a NACK of a nonce never sent was recorded: %+v", ts)
		}
		// Delta: the same kind of nonsense.
		d := e.DeltaADS(t)
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: ""})
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: odd, ResourceNamesUnsubscribe: []string{"never", "*", ""},
			InitialResourceVersions: map[string]string{"c1": "bogus", "": "", "ghost": "v1"}})
		dr := d.Recv()
		names := rawxds.DeltaNames(dr)
		if !slices.Contains(names, "c1") {
			t.Fatalf("delta response names %v lack c1", names)
		}
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: dr.Nonce})
		w.bump(t)
	})

	t.Run("R1_per_type_stream_refuses_other_types", func(t *testing.T) {
		e, w := robustEnv(t)
		cdsc := clusterservice.NewClusterDiscoveryServiceClient(e.Conn)
		edsc := endpointservice.NewEndpointDiscoveryServiceClient(e.Conn)
		openCDS := func() *rawxds.SotW {
			return rawxds.Open[*discovery.DiscoveryRequest, *discovery.DiscoveryResponse](t,
				func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse], error) {
					return cdsc.StreamClusters(ctx)
				})
		}
		// Another served type on the first request.
		s := openCDS()
		s.Send(req(eds, "c1"))
		wantCode(t, s.Err(), codes.InvalidArgument)
		// An unknown type after a healthy exchange.
		s = openCDS()
		s.Send(req(cds))
		r := s.Recv()
		wantNames(t, r, "c1")
		s.Send(&discovery.DiscoveryRequest{TypeUrl: unknownTypeURLs[0], ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo})
		wantCode(t, s.Err(), codes.InvalidArgument)
		// Delta per-type stream.
		d := rawxds.Open[*discovery.DeltaDiscoveryRequest, *discovery.DeltaDiscoveryResponse](t,
			func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse], error) {
				return edsc.DeltaEndpoints(ctx)
			})
		d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: lds})
		wantCode(t, d.Err(), codes.InvalidArgument)
		// Unary fetch.
		ctx, cancel := context.WithTimeout(context.Background(), rawxds.Timeout)
		defer cancel()
		_, err := cdsc.FetchClusters(ctx, req(eds, "c1"))
		wantCode(t, err, codes.InvalidArgument)
		if n := len(e.Server.Status()); n != 2 {
			t.Fatalf("%d streams open, want only the 2 witnesses", n)
		}
		w.bump(t)
	})

	t.Run("R1_100000_resource_names", func(t *testing.T) {
		e, w := robustEnv(t)
		names := manyNames("missing", 100_000)
		// SotW, non-wildcard type: only what exists is sent.
		s := e.ADS(t)
		s.Send(req(eds, append(slices.Clone(names), "c1")...))
		r := s.Recv()
		wantNames(t, r, "c1")
		s.Send(ack(r, append(slices.Clone(names), "c1")...))
		// SotW, full-state type on a per-type stream.
		cdsc := clusterservice.NewClusterDiscoveryServiceClient(e.Conn)
		c := rawxds.Open[*discovery.DiscoveryRequest, *discovery.DiscoveryResponse](t,
			func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse], error) {
				return cdsc.StreamClusters(ctx)
			})
		c.Send(req(cds, append(slices.Clone(names), "*")...))
		wantNames(t, c.Recv(), "c1")
		// Delta: every missing name is answered as not existing (D5).
		d := e.DeltaADS(t)
		d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: eds, ResourceNamesSubscribe: append(slices.Clone(names), "c1")})
		dr := d.Recv()
		if len(dr.Resources) != len(names)+1 {
			t.Fatalf("delta response has %d resources, want %d", len(dr.Resources), len(names)+1)
		}
		for _, x := range dr.Resources {
			if (x.Name == "c1") != (x.Resource != nil) {
				t.Fatalf("delta resource %q has body %v", x.Name, x.Resource != nil)
			}
		}
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: dr.Nonce, ResourceNamesUnsubscribe: names})
		w.bump(t)
		// The streams still work: a change to c1 reaches all three.
		w.base[1] = rawxds.Endpoints("c1", 2)
		w.bump(t)
		wantNames(t, s.Recv(), "c1")
		dr = d.Recv()
		wantDeltaNames(t, dr, "c1")
	})

	t.Run("R1_request_at_the_4MiB_limit", func(t *testing.T) {
		e, w := robustEnv(t)
		at := e.ADS(t)
		at.Send(sizedRequest(t, grpcMaxRecv))
		r := at.Recv()
		wantNames(t, r, "c1")
		over := e.ADS(t)
		over.Send(sizedRequest(t, grpcMaxRecv+1))
		wantCode(t, over.Err(), codes.ResourceExhausted)
		d := e.DeltaADS(t)
		big := sizedRequest(t, grpcMaxRecv+1)
		d.Send(&discovery.DeltaDiscoveryRequest{Node: big.Node, TypeUrl: eds, ResourceNamesSubscribe: big.ResourceNames})
		wantCode(t, d.Err(), codes.ResourceExhausted)
		w.bump(t)
		// The stream at the limit is still served.
		at.Send(ack(r, "c1"))
		w.base[1] = rawxds.Endpoints("c1", 2)
		w.bump(t)
		wantNames(t, at.Recv(), "c1")
	})

	t.Run("R1_garbage_frames", func(t *testing.T) {
		e, w := robustEnv(t)
		var utf8 []byte // DiscoveryRequest{resource_names: ["\xff\xfe"]}
		utf8 = protowire.AppendTag(utf8, 3, protowire.BytesType)
		utf8 = protowire.AppendBytes(utf8, []byte{0xff, 0xfe})
		frames := map[string][]byte{
			"not protobuf":        {0xff, 0xff, 0xff, 0xff, 0xff},
			"truncated field":     {0x0a, 0x40, 'v'},
			"invalid UTF-8":       utf8,
			"nesting 20000 deep":  server.NestedNodeRequest(20_000, false),
			"length past the end": {0x22, 0x01},
		}
		for what, f := range frames {
			for _, m := range []string{adsSotwMethod, adsDeltaMethod, cdsSotwMethod} {
				err := sendRawFrames(t, e.Conn, m, f)
				if status.Code(err) != codes.Internal {
					t.Errorf("%s on %s: stream ended with %v, want code Internal", what, m, err)
				}
			}
		}
		// A valid request followed by garbage: the stream is served, then
		// closed.
		good, _ := proto.Marshal(req(cds))
		if err := sendRawFrames(t, e.Conn, adsSotwMethod, good, frames["not protobuf"]); status.Code(err) != codes.Internal {
			t.Errorf("good then garbage: stream ended with %v, want code Internal", err)
		}
		// Frames that decode, if oddly (a wrong wire type and unknown
		// fields are kept as unknown fields), are requests like any other:
		// these have no type URL and are ignored; the stream goes on.
		ctx, cancel := context.WithTimeout(context.Background(), rawxds.Timeout)
		defer cancel()
		cs, err := e.Conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, adsSotwMethod, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range [][]byte{{0x20, 0x01}, {0xf8, 0xff, 0xff, 0x0f, 0x07}, {}, good} {
			if err := cs.SendMsg(f); err != nil {
				t.Fatal(err)
			}
		}
		var b []byte
		if err := cs.RecvMsg(&b); err != nil {
			t.Fatal(err)
		}
		var resp discovery.DiscoveryResponse
		if err := proto.Unmarshal(b, &resp); err != nil {
			t.Fatal(err)
		}
		wantNames(t, &resp, "c1")
		cancel()
		w.bump(t)
		waitFor(t, func() bool { return len(e.Server.Status()) == 2 })
	})

	t.Run("R1_delta_nonsense_nonces", func(t *testing.T) {
		e, w := robustEnv(t)
		d := e.DeltaADS(t)
		// A nonce on the very first request, one the server never sent.
		d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n1"), TypeUrl: eds, ResponseNonce: "no-such-nonce",
			ResourceNamesSubscribe: []string{"c1"}})
		dr := d.Recv()
		wantDeltaNames(t, dr, "c1")
		// A NACK of a nonce that was never sent is no NACK, but its
		// subscription change is honoured (D2).
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: "18446744073709551615",
			ResourceNamesSubscribe: []string{"c2"}, ErrorDetail: &rpcstatus.Status{Code: 3, Message: "bogus"}})
		// ... and so is an ACK of the right nonce that comes later.
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: dr.Nonce})
		dr2 := d.Recv()
		wantDeltaNames(t, dr2, "c2") // does not exist (D5)
		if ts := streamTypeStatus(t, e, "n1", "ads/delta", eds); ts.NackMessage != "" {
			t.Fatalf("a NACK of an unknown nonce was recorded: %+v", ts)
		}
		// Nonces of other streams, of other types, empty and huge ones.
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: w.sotwNonce(t)})
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: cds, ResponseNonce: dr2.Nonce, ResourceNamesSubscribe: []string{"c1"}})
		cr := d.Recv()
		if cr.TypeUrl != cds {
			t.Fatalf("got %s, want %s", cr.TypeUrl, cds)
		}
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: strings.Repeat("9", 1<<20)})
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: dr2.Nonce})
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: dr2.Nonce}) // twice
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: cds, ResponseNonce: cr.Nonce})
		w.bump(t)
		// The stream still works.
		w.base[1] = rawxds.Endpoints("c1", 2)
		w.bump(t)
		wantDeltaNames(t, d.Recv(), "c1")
	})

	t.Run("R1_malformed_rest_bodies", func(t *testing.T) {
		e, w := robustEnv(t)
		hs := httptest.NewServer(e.Server.RESTHandler(server.RESTConfig{PollTimeout: time.Second, MaxBodyBytes: 1 << 20}))
		defer hs.Close()
		deep := strings.Repeat(`{"fields":{"k":{"structValue":`, 20_000)
		cases := []struct {
			what, method, path string
			body               []byte
			want               int
		}{
			{"not JSON", "POST", "/v3/discovery:clusters", []byte("\x00\xff garbage"), http.StatusBadRequest},
			{"truncated JSON", "POST", "/v3/discovery:clusters", []byte(`{"node":{"id":"x"`), http.StatusBadRequest},
			{"wrong shape", "POST", "/v3/discovery:clusters", []byte(`{"resourceNames":"c1"}`), http.StatusBadRequest},
			{"unknown field, ignored", "POST", "/v3/discovery:clusters", []byte(`{"noSuchField":1}`), http.StatusOK},
			{"invalid UTF-8", "POST", "/v3/discovery:clusters", []byte("{\"resourceNames\":[\"\xff\xfe\"]}"), http.StatusBadRequest},
			{"nesting 20000 deep", "POST", "/v3/discovery:clusters", []byte(`{"node":{"metadata":` + deep + `}}`), http.StatusBadRequest},
			{"type URL of another path", "POST", "/v3/discovery:clusters", []byte(`{"typeUrl":"` + eds + `"}`), http.StatusBadRequest},
			{"over the body limit", "POST", "/v3/discovery:clusters", []byte(`{"versionInfo":"` + strings.Repeat("v", 2<<20) + `"}`), http.StatusRequestEntityTooLarge},
			{"unknown type", "POST", "/v3/discovery:nothing", []byte(`{}`), http.StatusNotFound},
			{"ADS path", "POST", "/v3/discovery:aggregated", []byte(`{}`), http.StatusNotFound},
			{"GET", "GET", "/v3/discovery:clusters", nil, http.StatusMethodNotAllowed},
		}
		for _, c := range cases {
			hr, err := http.NewRequest(c.method, hs.URL+c.path, bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				t.Fatalf("%s: %v", c.what, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s: status %d, want %d", c.what, resp.StatusCode, c.want)
			}
		}
		// A body that breaks off (a malformed chunk) is the client's
		// fault, not one too large.
		conn, err := net.Dial("tcp", hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, "POST /v3/discovery:clusters HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\nzz\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a malformed chunk: status %d, want %d", resp.StatusCode, http.StatusBadRequest)
		}
		// The REST endpoint still answers a good request, and gRPC
		// clients were not disturbed.
		resp, err = http.Post(hs.URL+"/v3/discovery:clusters", "application/json", strings.NewReader(`{"node":{"id":"rest"}}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"c1"`) {
			t.Fatalf("good REST request: %d %s", resp.StatusCode, b)
		}
		w.bump(t)
	})

	t.Run("R2_streams_opened_and_dropped_leave_nothing_behind", func(t *testing.T) {
		const held, churned = 1000, 1000
		e := start(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.Listener("l1", 80))
		ads := discovery.NewAggregatedDiscoveryServiceClient(e.Conn)
		cdsc := clusterservice.NewClusterDiscoveryServiceClient(e.Conn)
		edsc := endpointservice.NewEndpointDiscoveryServiceClient(e.Conn)
		node := func(i int) *corev3.Node { return rawxds.Node(fmt.Sprintf("r2-%d", i)) }

		// open runs one stream of the given kind up to the point where it
		// is to be dropped, and returns the function that drops it.
		open := func(kind, i int) (drop func() error, err error) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*rawxds.Timeout)
			dropNow := func() error { cancel(); return nil }
			fail := func(err error) (func() error, error) { cancel(); return nil, fmt.Errorf("kind %d: %w", kind, err) }
			switch kind {
			case 0: // SotW ADS, one exchange
				s, err := ads.StreamAggregatedResources(ctx)
				if err == nil {
					err = s.Send(&discovery.DiscoveryRequest{Node: node(i), TypeUrl: cds})
				}
				if err == nil {
					_, err = s.Recv()
				}
				if err != nil {
					return fail(err)
				}
				return dropNow, nil
			case 1: // delta ADS, one exchange
				s, err := ads.DeltaAggregatedResources(ctx)
				if err == nil {
					err = s.Send(&discovery.DeltaDiscoveryRequest{Node: node(i), TypeUrl: eds, ResourceNamesSubscribe: []string{"c1", "x"}})
				}
				if err == nil {
					_, err = s.Recv()
				}
				if err != nil {
					return fail(err)
				}
				return dropNow, nil
			case 2: // opened, never used
				if _, err := ads.StreamAggregatedResources(ctx); err != nil {
					return fail(err)
				}
				return dropNow, nil
			case 3: // dropped mid-request: the response is not read
				s, err := ads.DeltaAggregatedResources(ctx)
				if err == nil {
					err = s.Send(&discovery.DeltaDiscoveryRequest{Node: node(i), TypeUrl: cds})
				}
				if err != nil {
					return fail(err)
				}
				return dropNow, nil
			case 4: // closed by the client (half-close): the server ends it
				s, err := ads.StreamAggregatedResources(ctx)
				if err == nil {
					err = s.Send(&discovery.DiscoveryRequest{Node: node(i), TypeUrl: lds})
				}
				if err == nil {
					_, err = s.Recv()
				}
				if err != nil {
					return fail(err)
				}
				return func() error {
					defer cancel()
					if err := s.CloseSend(); err != nil {
						return err
					}
					if _, err := s.Recv(); !errors.Is(err, io.EOF) {
						return fmt.Errorf("kind 4: after CloseSend got %v, want EOF", err)
					}
					return nil
				}, nil
			case 5: // per-type SotW, exchange and ACK
				s, err := cdsc.StreamClusters(ctx)
				if err == nil {
					err = s.Send(&discovery.DiscoveryRequest{Node: node(i), TypeUrl: cds})
				}
				var r *discovery.DiscoveryResponse
				if err == nil {
					r, err = s.Recv()
				}
				if err == nil {
					err = s.Send(ack(r))
				}
				if err != nil {
					return fail(err)
				}
				return dropNow, nil
			case 6: // per-type delta, exchange
				s, err := edsc.DeltaEndpoints(ctx)
				if err == nil {
					err = s.Send(&discovery.DeltaDiscoveryRequest{Node: node(i), ResourceNamesSubscribe: []string{"c1"}})
				}
				if err == nil {
					_, err = s.Recv()
				}
				if err != nil {
					return fail(err)
				}
				return dropNow, nil
			default: // refused by the server
				s, err := cdsc.StreamClusters(ctx)
				if err == nil {
					err = s.Send(&discovery.DiscoveryRequest{Node: node(i), TypeUrl: eds})
				}
				if err != nil {
					return fail(err)
				}
				return func() error {
					defer cancel()
					if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
						return fmt.Errorf("kind 7: got %v, want InvalidArgument", err)
					}
					return nil
				}, nil
			}
		}
		// parallel runs f(i) for i < n on a few workers and fails the
		// test with the first few errors.
		parallel := func(n int, f func(i int) error) {
			t.Helper()
			var (
				mu   sync.Mutex
				errs []error
				wg   sync.WaitGroup
				next = make(chan int)
			)
			for range 16 {
				wg.Go(func() {
					for i := range next {
						if err := f(i); err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
						}
					}
				})
			}
			for i := range n {
				next <- i
			}
			close(next)
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d of %d streams failed, first: %v", len(errs), n, errors.Join(errs[:min(len(errs), 3)]...))
			}
		}
		// settled polls until no stream is open and the goroutine count is
		// back to at most limit.
		settled := func(limit int) {
			t.Helper()
			deadline := time.Now().Add(2 * rawxds.Timeout)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				n, g := len(e.Server.Status()), runtime.NumGoroutine()
				if n == 0 && g <= limit {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("after dropping every stream: %d still in Status, %d goroutines (limit %d)", n, g, limit)
				}
				<-tick.C
			}
		}

		// Warm up the connection, then take the baseline.
		drop, err := open(0, -1)
		if err != nil {
			t.Fatal(err)
		}
		_ = drop()
		settled(1 << 30)
		baseline := runtime.NumGoroutine()
		const slack = 4 // transient goroutines of the gRPC transport

		// Phase 1: many streams open at once, then all dropped at once.
		drops := make([]func() error, held)
		parallel(held, func(i int) error {
			var err error
			drops[i], err = open(i%8, i)
			return err
		})
		// Every stream but the refused ones (kind 7) is open.
		waitFor(t, func() bool { return len(e.Server.Status()) == held-held/8 })
		peak := runtime.NumGoroutine()
		parallel(held, func(i int) error { return drops[i]() })
		clear(drops)
		settled(baseline + slack)
		// The first thousand streams grow maps and pools to their peak
		// size; from here on the heap must stay flat.
		heap0 := heapAlloc()

		// Phase 2: streams opened and dropped one after another.
		parallel(churned, func(i int) error {
			drop, err := open(i%8, held+i)
			if err != nil {
				return err
			}
			return drop()
		})

		settled(baseline + slack)
		heap1 := heapAlloc()
		grow := int64(heap1) - int64(heap0)
		t.Logf("goroutines: baseline %d, peak %d with %d streams, after %d; heap %d -> %d KiB over %d more streams",
			baseline, peak, held, runtime.NumGoroutine(), heap0>>10, heap1>>10, churned)
		if limit := int64(churned) * 256; grow > limit {
			t.Fatalf("heap grew by %d KiB over %d streams opened and dropped, want at most %d KiB", grow>>10, churned, limit>>10)
		}
	})

	// Streams whose handlers are stuck sending (no window from their
	// client) hold no worker: a publication's wake-up of such a stream
	// leaves its turn to the handler, instead of waiting for the stream's
	// lock on a worker, which left the other streams' wake-ups behind one
	// stall of the workers per stuck stream.
	t.Run("R3_streams_without_window_hold_no_worker", func(t *testing.T) {
		const stuck = 40
		big := func(i int) *resource.Resource { return bigEndpoints("big", 128<<10, i) }
		c := cache.New(nil)
		port := uint32(1)
		snapshot := func(i int) *cache.Snapshot {
			return cache.MustSnapshot(rawxds.Cluster("c1"), rawxds.Endpoints("w", port), big(i))
		}
		c.SetSnapshot("", snapshot(0))
		e := rawxds.Start(t, c, server.Config{})
		slowConn, err := grpc.NewClient(e.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		slowCtx, slowCancel := context.WithCancel(context.Background())
		t.Cleanup(func() { slowCancel(); slowConn.Close() })
		for i := range stuck {
			s, err := discovery.NewAggregatedDiscoveryServiceClient(slowConn).StreamAggregatedResources(slowCtx)
			if err != nil {
				t.Fatal(err)
			}
			// The second response blocks on grpc-go's transport, which
			// takes one message past the window; the first on h2grpc.
			for _, r := range []*discovery.DiscoveryRequest{
				{Node: rawxds.Node(fmt.Sprint("stuck-", i)), TypeUrl: eds, ResourceNames: []string{"big"}},
				{TypeUrl: cds},
			} {
				if err := s.Send(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		waitFor(t, func() bool { return len(e.Server.Status()) == stuck })
		waitFor(t, sendBlocked)

		normal := e.ADS(t)
		normal.Send(req(eds, "w"))
		r := normal.Recv()
		wantNames(t, r, "w")
		normal.Send(ack(r, "w"))
		for round := 1; round <= 3; round++ {
			port++
			c.SetSnapshot("", snapshot(round)) // wakes every stuck stream too
			r := normal.Recv()
			wantNames(t, r, "w")
			normal.Send(ack(r, "w"))
		}
		// No worker waits for a stuck stream's lock.
		waitFor(t, func() bool { return len(stacks.In("server.(*stream).wakeUp")) == 0 })
		if !sendBlocked() {
			t.Fatal("no stream is stuck sending: the test proved nothing")
		}
	})

	t.Run("R3_slow_reader_delays_nobody", func(t *testing.T) {
		const nBig, bigSize, rounds = 24, 128 << 10, 4 // 3 MiB of endpoints
		bigs := make([]*resource.Resource, nBig)
		bigNames := make([]string, nBig)
		for i := range bigs {
			bigNames[i] = fmt.Sprintf("big-%02d", i)
			bigs[i] = bigEndpoints(bigNames[i], bigSize, i)
		}
		allEDS := append(slices.Clone(bigNames), "w")
		routes := bigRoute("big-routes", 2000)
		port := uint32(1)
		snapshot := func() *cache.Snapshot {
			rs := append([]*resource.Resource{rawxds.Cluster("c1"), rawxds.Endpoints("w", port), routes}, bigs...)
			return cache.MustSnapshot(rs...)
		}
		c := cache.New(nil)
		c.SetSnapshot("", snapshot())
		e := rawxds.Start(t, c, server.Config{})
		edsSize := 0
		for _, b := range bigs {
			edsSize += proto.Size(b.Body)
		}

		// fullState connects a new client, fetches the clusters and every
		// endpoint, and returns how long that took.
		ads := discovery.NewAggregatedDiscoveryServiceClient(e.Conn)
		fullState := func() time.Duration {
			t.Helper()
			start := time.Now()
			s := rawxds.Open[*discovery.DiscoveryRequest, *discovery.DiscoveryResponse](t,
				func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse], error) {
					return ads.StreamAggregatedResources(ctx, grpc.MaxCallRecvMsgSize(64<<20))
				})
			defer s.Close()
			s.Send(req(cds))
			s.Send(req(eds, allEDS...))
			wantNames(t, s.Recv(), "c1")
			wantNames(t, s.Recv(), allEDS...)
			return time.Since(start)
		}
		// Without a slow client, for comparison.
		unloaded := fullState()
		t.Logf("EDS state %d KiB, routes %d KiB; full state without a slow client in %v",
			edsSize>>10, proto.Size(routes.Body)>>10, unloaded)

		// The slow client: its own connection with the smallest HTTP/2
		// windows (no BDP growth), and a stream it never reads.
		slowConn, err := grpc.NewClient(e.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { slowConn.Close() })
		slowCtx, slowCancel := context.WithCancel(context.Background())
		t.Cleanup(slowCancel)
		subscribeAll := func(conn *grpc.ClientConn, id string) {
			t.Helper()
			s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(slowCtx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []*discovery.DiscoveryRequest{
				{Node: rawxds.Node(id), TypeUrl: cds},
				{TypeUrl: eds, ResourceNames: allEDS},
				{TypeUrl: rds, ResourceNames: []string{"big-routes"}},
			} {
				if err := s.Send(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		subscribeAll(slowConn, "slow")
		// A second one shares the connection of the other clients.
		subscribeAll(e.Conn, "slow-shared")
		// Precondition: the server is stuck sending to a slow client.
		waitFor(t, sendBlocked)

		normal := e.ADS(t)
		normal.Send(req(cds))
		wantNames(t, normal.Recv(), "c1")
		normal.Send(req(eds, "w"))
		r := normal.Recv()
		wantNames(t, r, "w")
		normal.Send(ack(r, "w"))

		const prompt = 2 * time.Second // generous for -race on a busy machine
		for round := 1; round <= rounds; round++ {
			// Change the small resource and one big one.
			port++
			bigs[round%nBig] = bigEndpoints(bigNames[round%nBig], bigSize, nBig+round)
			snap := snapshot()
			start := time.Now()
			c.SetSnapshot("", snap)
			published := time.Since(start)
			r := normal.Recv()
			got := time.Since(start)
			wantNames(t, r, "w")
			normal.Send(ack(r, "w"))
			if got > prompt {
				t.Errorf("round %d: the normal client got the change after %v, want under %v", round, got, prompt)
			}
			// A client connecting now gets its full state at once.
			full := fullState()
			if limit := 2*unloaded + prompt; full > limit {
				t.Errorf("round %d: a new client got its full state after %v, want under %v", round, full, limit)
			}
			t.Logf("round %d: publish %v, change %v, full state for a new client %v", round, published, got, full)
		}
		if !sendBlocked() {
			t.Fatal("the server is no longer blocked sending to the slow client: the test proved nothing")
		}
		// The new clients' streams end asynchronously on the server.
		waitFor(t, func() bool { return len(e.Server.Status()) == 3 }) // the 2 slow ones and the normal one
	})
}

// streamTypeStatus returns the status of typeURL on the one open stream of
// the given node and variant.
func streamTypeStatus(t *testing.T, e *rawxds.Env, node, variant, typeURL string) server.TypeStatus {
	t.Helper()
	var found []server.StreamStatus
	for _, s := range e.Server.Status() {
		if s.Node.GetId() == node && s.Variant == variant {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s streams of node %q, want 1", len(found), variant, node)
	}
	for _, ts := range found[0].Types {
		if ts.TypeURL == typeURL {
			return ts
		}
	}
	t.Fatalf("no %s status on the %s stream of node %q", typeURL, variant, node)
	return server.TypeStatus{}
}

// sotwNonce returns the latest nonce sent to the SotW witness.
func (w *witness) sotwNonce(t *testing.T) string {
	t.Helper()
	for _, s := range w.e.Server.Status() {
		if s.Node.GetId() == "witness" && strings.HasSuffix(s.Variant, "/sotw") {
			for _, ts := range s.Types {
				return ts.SentNonce
			}
		}
	}
	t.Fatal("no SotW witness in Status")
	return ""
}

// logRecorder keeps the messages of the records its handlers take, and
// the length of each record's text.
type logRecorder struct {
	mu     sync.Mutex
	msgs   []string
	sizes  []int
	levels []slog.Level
	texts  []string // each record's message and attributes
}

// handler returns a slog.Handler that records into r.
func (r *logRecorder) handler() slog.Handler { return recordingHandler{rec: r} }

// recordingHandler is a logRecorder's slog.Handler, with the attributes
// given to WithAttrs.
type recordingHandler struct {
	rec   *logRecorder
	attrs []slog.Attr
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	text := []string{r.Message}
	for _, a := range h.attrs {
		text = append(text, a.String())
	}
	r.Attrs(func(a slog.Attr) bool { text = append(text, a.String()); return true })
	n := 0
	for _, s := range text {
		n += len(s)
	}
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	h.rec.msgs, h.rec.sizes = append(h.rec.msgs, r.Message), append(h.rec.sizes, n)
	h.rec.texts = append(h.rec.texts, strings.Join(text, " "))
	h.rec.levels = append(h.rec.levels, r.Level)
	return nil
}

func (h recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return recordingHandler{h.rec, append(slices.Clone(h.attrs), as...)}
}

func (h recordingHandler) WithGroup(string) slog.Handler { return h }

// count returns how many records' messages start with prefix.
func (r *logRecorder) count(prefix string) int { return r.countAt(slog.LevelDebug, prefix) }

// countAt returns how many records at level or above have messages that
// start with prefix.
func (r *logRecorder) countAt(level slog.Level, prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i, m := range r.msgs {
		if r.levels[i] >= level && strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// contains reports whether a record's message or attributes hold s.
func (r *logRecorder) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.texts, func(t string) bool { return strings.Contains(t, s) })
}

// longest returns the length of the longest record's text.
func (r *logRecorder) longest() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Max(append(r.sizes, 0))
}
