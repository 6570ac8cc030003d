package server

import (
	"context"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionservice "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/resource"
)

// Register registers every xDS service on r (PROTOCOL T1, T2): ADS, and the
// LDS, RDS, SRDS, VHDS, CDS, EDS, SDS, RTDS and ECDS services.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	discovery.RegisterAggregatedDiscoveryServiceServer(r, adsService{s: s})
	listenerservice.RegisterListenerDiscoveryServiceServer(r, ldsService{s: s})
	routeservice.RegisterRouteDiscoveryServiceServer(r, rdsService{s: s})
	routeservice.RegisterScopedRoutesDiscoveryServiceServer(r, srdsService{s: s})
	routeservice.RegisterVirtualHostDiscoveryServiceServer(r, vhdsService{s: s})
	clusterservice.RegisterClusterDiscoveryServiceServer(r, cdsService{s: s})
	endpointservice.RegisterEndpointDiscoveryServiceServer(r, edsService{s: s})
	secretservice.RegisterSecretDiscoveryServiceServer(r, sdsService{s: s})
	runtimeservice.RegisterRuntimeDiscoveryServiceServer(r, rtdsService{s: s})
	extensionservice.RegisterExtensionConfigDiscoveryServiceServer(r, ecdsService{s: s})
}

var (
	ldsType  = resource.Lookup(resource.ListenerType)
	rdsType  = resource.Lookup(resource.RouteType)
	srdsType = resource.Lookup(resource.ScopedRouteType)
	vhdsType = resource.Lookup(resource.VirtualHostType)
	cdsType  = resource.Lookup(resource.ClusterType)
	edsType  = resource.Lookup(resource.EndpointType)
	sdsType  = resource.Lookup(resource.SecretType)
	rtdsType = resource.Lookup(resource.RuntimeType)
	ecdsType = resource.Lookup(resource.ExtensionType)
)

type adsService struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	s *Server
}

func (a adsService) StreamAggregatedResources(gs sotwStream) error { return a.s.serveSotw(gs, nil) }
func (a adsService) DeltaAggregatedResources(gs deltaStream) error { return a.s.serveDelta(gs, nil) }

type ldsService struct {
	listenerservice.UnimplementedListenerDiscoveryServiceServer
	s *Server
}

func (x ldsService) StreamListeners(gs sotwStream) error { return x.s.serveSotw(gs, ldsType) }
func (x ldsService) DeltaListeners(gs deltaStream) error { return x.s.serveDelta(gs, ldsType) }
func (x ldsService) FetchListeners(ctx context.Context, r *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return x.s.fetch(ctx, r, ldsType)
}

type rdsService struct {
	routeservice.UnimplementedRouteDiscoveryServiceServer
	s *Server
}

func (x rdsService) StreamRoutes(gs sotwStream) error { return x.s.serveSotw(gs, rdsType) }
func (x rdsService) DeltaRoutes(gs deltaStream) error { return x.s.serveDelta(gs, rdsType) }
func (x rdsService) FetchRoutes(ctx context.Context, r *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return x.s.fetch(ctx, r, rdsType)
}

type srdsService struct {
	routeservice.UnimplementedScopedRoutesDiscoveryServiceServer
	s *Server
}

func (x srdsService) StreamScopedRoutes(gs sotwStream) error { return x.s.serveSotw(gs, srdsType) }
func (x srdsService) DeltaScopedRoutes(gs deltaStream) error { return x.s.serveDelta(gs, srdsType) }
func (x srdsService) FetchScopedRoutes(ctx context.Context, r *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return x.s.fetch(ctx, r, srdsType)
}

type vhdsService struct {
	routeservice.UnimplementedVirtualHostDiscoveryServiceServer
	s *Server
}

func (x vhdsService) DeltaVirtualHosts(gs deltaStream) error { return x.s.serveDelta(gs, vhdsType) }

type cdsService struct {
	clusterservice.UnimplementedClusterDiscoveryServiceServer
	s *Server
}

func (x cdsService) StreamClusters(gs sotwStream) error { return x.s.serveSotw(gs, cdsType) }
func (x cdsService) DeltaClusters(gs deltaStream) error { return x.s.serveDelta(gs, cdsType) }
func (x cdsService) FetchClusters(ctx context.Context, r *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return x.s.fetch(ctx, r, cdsType)
}

type edsService struct {
	endpointservice.UnimplementedEndpointDiscoveryServiceServer
	s *Server
}

func (x edsService) StreamEndpoints(gs sotwStream) error { return x.s.serveSotw(gs, edsType) }
func (x edsService) DeltaEndpoints(gs deltaStream) error { return x.s.serveDelta(gs, edsType) }
func (x edsService) FetchEndpoints(ctx context.Context, r *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return x.s.fetch(ctx, r, edsType)
}

type sdsService struct {
	secretservice.UnimplementedSecretDiscoveryServiceServer
	s *Server
}

func (x sdsService) StreamSecrets(gs sotwStream) error { return x.s.serveSotw(gs, sdsType) }
func (x sdsService) DeltaSecrets(gs deltaStream) error { return x.s.serveDelta(gs, sdsType) }
func (x sdsService) FetchSecrets(ctx context.Context, r *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return x.s.fetch(ctx, r, sdsType)
}

type rtdsService struct {
	runtimeservice.UnimplementedRuntimeDiscoveryServiceServer
	s *Server
}

func (x rtdsService) StreamRuntime(gs sotwStream) error { return x.s.serveSotw(gs, rtdsType) }
func (x rtdsService) DeltaRuntime(gs deltaStream) error { return x.s.serveDelta(gs, rtdsType) }
func (x rtdsService) FetchRuntime(ctx context.Context, r *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return x.s.fetch(ctx, r, rtdsType)
}

type ecdsService struct {
	extensionservice.UnimplementedExtensionConfigDiscoveryServiceServer
	s *Server
}

func (x ecdsService) StreamExtensionConfigs(gs sotwStream) error { return x.s.serveSotw(gs, ecdsType) }
func (x ecdsService) DeltaExtensionConfigs(gs deltaStream) error { return x.s.serveDelta(gs, ecdsType) }
func (x ecdsService) FetchExtensionConfigs(ctx context.Context, r *discovery.DiscoveryRequest) (*discovery.DiscoveryResponse, error) {
	return x.s.fetch(ctx, r, ecdsType)
}
