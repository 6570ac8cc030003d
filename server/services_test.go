package server_test

import (
	"context"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionservice "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

type (
	sotwClient  = grpc.BidiStreamingClient[discovery.DiscoveryRequest, discovery.DiscoveryResponse]
	deltaClient = grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]
)

// service is one per-type xDS service with a resource of its type.
type service struct {
	name  string
	typ   string
	res   *resource.Resource
	sotw  func(*grpc.ClientConn, context.Context) (sotwClient, error) // nil: delta only
	delta func(*grpc.ClientConn, context.Context) (deltaClient, error)
}

func services() []service {
	anyStruct, _ := anypb.New(&structpb.Struct{})
	return []service{
		{"LDS", resource.ListenerType, rawxds.Listener("l", 80),
			func(c *grpc.ClientConn, ctx context.Context) (sotwClient, error) {
				return listenerservice.NewListenerDiscoveryServiceClient(c).StreamListeners(ctx)
			},
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return listenerservice.NewListenerDiscoveryServiceClient(c).DeltaListeners(ctx)
			}},
		{"RDS", resource.RouteType, rawxds.Route("r", "c"),
			func(c *grpc.ClientConn, ctx context.Context) (sotwClient, error) {
				return routeservice.NewRouteDiscoveryServiceClient(c).StreamRoutes(ctx)
			},
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return routeservice.NewRouteDiscoveryServiceClient(c).DeltaRoutes(ctx)
			}},
		{"SRDS", resource.ScopedRouteType, resource.MustNew(&routev3.ScopedRouteConfiguration{
			Name: "s", RouteConfigurationName: "r",
			Key: &routev3.ScopedRouteConfiguration_Key{Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{
				{Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: "k"}}}},
		}),
			func(c *grpc.ClientConn, ctx context.Context) (sotwClient, error) {
				return routeservice.NewScopedRoutesDiscoveryServiceClient(c).StreamScopedRoutes(ctx)
			},
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return routeservice.NewScopedRoutesDiscoveryServiceClient(c).DeltaScopedRoutes(ctx)
			}},
		{"VHDS", resource.VirtualHostType, rawxds.VirtualHost("r", "v", "example.com"), nil,
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return routeservice.NewVirtualHostDiscoveryServiceClient(c).DeltaVirtualHosts(ctx)
			}},
		{"CDS", resource.ClusterType, rawxds.Cluster("c"),
			func(c *grpc.ClientConn, ctx context.Context) (sotwClient, error) {
				return clusterservice.NewClusterDiscoveryServiceClient(c).StreamClusters(ctx)
			},
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return clusterservice.NewClusterDiscoveryServiceClient(c).DeltaClusters(ctx)
			}},
		{"EDS", resource.EndpointType, rawxds.Endpoints("c", 1),
			func(c *grpc.ClientConn, ctx context.Context) (sotwClient, error) {
				return endpointservice.NewEndpointDiscoveryServiceClient(c).StreamEndpoints(ctx)
			},
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return endpointservice.NewEndpointDiscoveryServiceClient(c).DeltaEndpoints(ctx)
			}},
		{"SDS", resource.SecretType, resource.MustNew(&tlsv3.Secret{Name: "s"}),
			func(c *grpc.ClientConn, ctx context.Context) (sotwClient, error) {
				return secretservice.NewSecretDiscoveryServiceClient(c).StreamSecrets(ctx)
			},
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return secretservice.NewSecretDiscoveryServiceClient(c).DeltaSecrets(ctx)
			}},
		{"RTDS", resource.RuntimeType, resource.MustNew(&runtimeservice.Runtime{Name: "rt", Layer: &structpb.Struct{}}),
			func(c *grpc.ClientConn, ctx context.Context) (sotwClient, error) {
				return runtimeservice.NewRuntimeDiscoveryServiceClient(c).StreamRuntime(ctx)
			},
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return runtimeservice.NewRuntimeDiscoveryServiceClient(c).DeltaRuntime(ctx)
			}},
		{"ECDS", resource.ExtensionType, resource.MustNew(&corev3.TypedExtensionConfig{Name: "x", TypedConfig: anyStruct}),
			func(c *grpc.ClientConn, ctx context.Context) (sotwClient, error) {
				return extensionservice.NewExtensionConfigDiscoveryServiceClient(c).StreamExtensionConfigs(ctx)
			},
			func(c *grpc.ClientConn, ctx context.Context) (deltaClient, error) {
				return extensionservice.NewExtensionConfigDiscoveryServiceClient(c).DeltaExtensionConfigs(ctx)
			}},
	}
}

func TestServices(t *testing.T) {
	svcs := services()
	var all []*resource.Resource
	for _, s := range svcs {
		all = append(all, s.res)
	}
	e := start(t, all...)

	t.Run("T1_ads_sotw_multiplexes_every_type", func(t *testing.T) {
		s := e.ADS(t)
		for _, svc := range svcs {
			if svc.sotw == nil {
				continue
			}
			s.Send(req(svc.typ, svc.res.Name))
			r := s.Recv()
			if r.TypeUrl != svc.typ {
				t.Fatalf("asked %s, got %s", svc.typ, r.TypeUrl)
			}
			wantNames(t, r, svc.res.Name)
		}
	})

	t.Run("T1_ads_delta_multiplexes_every_type", func(t *testing.T) {
		s := e.DeltaADS(t)
		for _, svc := range svcs {
			s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n"), TypeUrl: svc.typ, ResourceNamesSubscribe: []string{svc.res.Name}})
			r := s.Recv()
			if r.TypeUrl != svc.typ || len(r.Resources) != 1 || r.Resources[0].Name != svc.res.Name || r.Resources[0].Resource == nil {
				t.Fatalf("asked %s %s, got %v", svc.typ, svc.res.Name, r)
			}
		}
	})

	for _, svc := range svcs {
		t.Run("T2_"+svc.name+"_per_type_service", func(t *testing.T) {
			if svc.sotw != nil {
				s := rawxds.Open(t, func(ctx context.Context) (sotwClient, error) { return svc.sotw(e.Conn, ctx) })
				s.Send(req(svc.typ, svc.res.Name))
				wantNames(t, s.Recv(), svc.res.Name)
			}
			d := rawxds.Open(t, func(ctx context.Context) (deltaClient, error) { return svc.delta(e.Conn, ctx) })
			d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n"), TypeUrl: svc.typ, ResourceNamesSubscribe: []string{svc.res.Name}})
			if got := rawxds.DeltaNames(d.Recv()); len(got) != 1 || got[0] != svc.res.Name {
				t.Fatalf("delta %s got %v", svc.name, got)
			}
		})
		t.Run("T2_"+svc.name+"_refuses_other_types", func(t *testing.T) {
			other := resource.ClusterType
			if svc.typ == other {
				other = resource.ListenerType
			}
			if svc.sotw != nil {
				s := rawxds.Open(t, func(ctx context.Context) (sotwClient, error) { return svc.sotw(e.Conn, ctx) })
				s.Send(req(other))
				if code := status.Code(s.Err()); code != codes.InvalidArgument {
					t.Fatalf("sotw %s asked for %s: code %v, want InvalidArgument", svc.name, other, code)
				}
			}
			d := rawxds.Open(t, func(ctx context.Context) (deltaClient, error) { return svc.delta(e.Conn, ctx) })
			d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n"), TypeUrl: other})
			if code := status.Code(d.Err()); code != codes.InvalidArgument {
				t.Fatalf("delta %s asked for %s: code %v, want InvalidArgument", svc.name, other, code)
			}
		})
	}

	t.Run("T3_type_urls", func(t *testing.T) {
		want := map[string]string{
			"LDS":  "type.googleapis.com/envoy.config.listener.v3.Listener",
			"RDS":  "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
			"SRDS": "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration",
			"VHDS": "type.googleapis.com/envoy.config.route.v3.VirtualHost",
			"CDS":  "type.googleapis.com/envoy.config.cluster.v3.Cluster",
			"EDS":  "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
			"SDS":  "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
			"RTDS": "type.googleapis.com/envoy.service.runtime.v3.Runtime",
			"ECDS": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
		}
		for _, svc := range svcs {
			if want[svc.name] != svc.typ || svc.res.Body.TypeUrl != svc.typ {
				t.Errorf("%s: type %s, body %s, want %s", svc.name, svc.typ, svc.res.Body.TypeUrl, want[svc.name])
			}
		}
	})

	t.Run("T3_unknown_type_on_ads_is_ignored", func(t *testing.T) {
		s := e.ADS(t)
		s.Send(req("type.googleapis.com/no.such.Type", "x"))
		s.Send(req(resource.ClusterType))
		if r := s.Recv(); r.TypeUrl != resource.ClusterType {
			t.Fatalf("got %s, want the cluster response", r.TypeUrl)
		}
		waitFor(t, func() bool {
			for _, st := range e.Server.Status() {
				if st.LastError != "" {
					return true
				}
			}
			return false
		})
		d := e.DeltaADS(t)
		d.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("n"), TypeUrl: "type.googleapis.com/no.such.Type"})
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType})
		if r := d.Recv(); r.TypeUrl != resource.ClusterType {
			t.Fatalf("got %s, want the cluster response", r.TypeUrl)
		}
	})
}

func TestNodes(t *testing.T) {
	t.Run("N1_default_every_node_sees_everything", func(t *testing.T) {
		e := start(t, rawxds.Cluster("a"), rawxds.Cluster("b"))
		for _, id := range []string{"x", "y"} {
			s := e.ADS(t)
			s.Send(&discovery.DiscoveryRequest{Node: rawxds.Node(id), TypeUrl: resource.ClusterType})
			wantNames(t, s.Recv(), "a", "b")
		}
	})

	t.Run("N1_groups_by_node", func(t *testing.T) {
		byCluster := func(n *corev3.Node) string { return n.GetCluster() }
		c := cache.New(byCluster)
		c.SetSnapshot("edge", cache.MustSnapshot(rawxds.Cluster("edge-only")))
		c.SetSnapshot("mesh", cache.MustSnapshot(rawxds.Cluster("mesh-only")))
		e := rawxds.Start(t, c, server.Config{})
		edge, mesh := e.ADS(t), e.ADS(t)
		edge.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "1", Cluster: "edge"}, TypeUrl: resource.ClusterType})
		mesh.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "2", Cluster: "mesh"}, TypeUrl: resource.ClusterType})
		re, rm := edge.Recv(), mesh.Recv()
		wantNames(t, re, "edge-only")
		wantNames(t, rm, "mesh-only")
		edge.Send(ack(re))
		mesh.Send(ack(rm))
		// A publish to one group wakes only that group.
		c.SetSnapshot("edge", cache.MustSnapshot(rawxds.Cluster("edge-only"), rawxds.Cluster("edge-2")))
		wantNames(t, edge.Recv(), "edge-only", "edge-2")
		mesh.ExpectNone()
	})

	t.Run("N1_changed_grouping_moves_open_streams", func(t *testing.T) {
		c := cache.New(nil)
		c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("everyone")))
		e := rawxds.Start(t, c, server.Config{})
		s := e.ADS(t)
		s.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "canary-1"}, TypeUrl: resource.ClusterType})
		r := s.Recv()
		wantNames(t, r, "everyone")
		s.Send(ack(r))
		// New rules put canaries in their own group, built on demand.
		c.SetGrouping(func(n *corev3.Node) string {
			if strings.HasPrefix(n.GetId(), "canary") {
				return "canary"
			}
			return ""
		}, func(group string) *cache.Snapshot {
			return cache.MustSnapshot(rawxds.Cluster("everyone"), rawxds.Cluster(group+"-only"))
		})
		wantNames(t, s.Recv(), "everyone", "canary-only")
	})
}
