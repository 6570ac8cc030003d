package rawxds

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/resource"
)

// Cluster returns an EDS cluster named name taking endpoints from its own
// name.
func Cluster(name string) *resource.Resource {
	return resource.MustNew(&clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
		},
	})
}

// Endpoints returns a ClusterLoadAssignment for cluster with one endpoint
// on 127.0.0.1:port.
func Endpoints(cluster string, port uint32) *resource.Resource {
	return resource.MustNew(&endpointv3.ClusterLoadAssignment{
		ClusterName: cluster,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
					}}},
				}},
			}},
		}},
	})
}

// Listener returns a listener named name on port; tests change its content
// by changing the port.
func Listener(name string, port uint32) *resource.Resource {
	return resource.MustNew(&listenerv3.Listener{
		Name: name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
		}}},
	})
}

// Route returns a route configuration named name sending everything to
// cluster.
func Route(name, cluster string) *resource.Resource {
	return resource.MustNew(&routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "vh",
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
			}},
		}},
	})
}

// VirtualHost returns a VHDS virtual host named "<routeConfig>/<name>" with
// the given domains.
func VirtualHost(routeConfig, name string, domains ...string) *resource.Resource {
	return resource.MustNew(&routev3.VirtualHost{Name: routeConfig + "/" + name, Domains: domains})
}

// Names returns the names of the resources in a SotW response.
func Names(resp *discovery.DiscoveryResponse) []string {
	var out []string
	for _, a := range resp.GetResources() {
		out = append(out, nameOf(a))
	}
	return out
}

// DeltaNames returns the names of the resources in a delta response.
func DeltaNames(resp *discovery.DeltaDiscoveryResponse) []string {
	var out []string
	for _, r := range resp.GetResources() {
		out = append(out, r.GetName())
	}
	return out
}

func nameOf(a *anypb.Any) string {
	if a.GetTypeUrl() == "type.googleapis.com/envoy.service.discovery.v3.Resource" {
		var r discovery.Resource
		if err := a.UnmarshalTo(&r); err == nil {
			return r.GetName()
		}
	}
	t := resource.Lookup(a.GetTypeUrl())
	if t == nil {
		return fmt.Sprintf("<%s>", a.GetTypeUrl())
	}
	m := t.New()
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return fmt.Sprintf("<bad %s>", a.GetTypeUrl())
	}
	r, err := resource.New(m)
	if err != nil {
		return fmt.Sprintf("<invalid %s>", a.GetTypeUrl())
	}
	return r.Name
}
