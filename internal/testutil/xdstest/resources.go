// Package xdstest holds helpers for end-to-end tests that drive a real
// grpc-go xDS client (the "xds:///" resolver of google.golang.org/grpc/xds)
// against an xDS management server.
//
// It provides:
//
//   - Envoy v3 resources that grpc-go (v1.85) accepts: [Listener],
//     [RouteConfig], [Cluster], [Endpoints], bundled by [DefaultResources];
//   - resources grpc-go rejects (NACKs): [NackListener], [NackCluster];
//   - a bootstrap builder and a dialer that does not touch process-global
//     state (no GRPC_XDS_BOOTSTRAP* env vars): [Bootstrap], [NewClient],
//     [Dial], [ResolverBuilder];
//   - a real gRPC backend that names itself in its answers: [StartBackend],
//     [CallBackend];
//   - the goroutine-leak options a goleak-checked test needs: [LeakOptions].
package xdstest

import (
	"fmt"
	"net"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Type URLs of the four resource types grpc-go's xDS client subscribes to.
const (
	ListenerType    = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteConfigType = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	ClusterType     = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointsType   = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// NACK texts. grpc-go v1.85 NACKs with a DiscoveryRequest whose error_detail
// has code 3 (INVALID_ARGUMENT) and a message of the form
//
//	error parsing "<TypeName>" response: resource "<name>": <reason>
//
// where TypeName is "ListenerResource", "RouteConfigResource",
// "ClusterResource" or "EndpointsResource". Several rejected resources in one
// response are joined with ";\n" in map order. The constants below are the
// <reason> parts for the resources built by [NackListener] and [NackCluster];
// match them with strings.Contains.
const (
	// NackListenerReason is the reason grpc-go gives for [NackListener].
	NackListenerReason = "http filters list is empty"
	// NackClusterReason is the start of the reason grpc-go gives for
	// [NackCluster]; the rest is the whole Cluster in proto text form.
	NackClusterReason = "unexpected lbPolicy RANDOM in response"
)

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("xdstest: anypb.New(%T): %v", m, err))
	}
	return a
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

// RouterFilter returns the terminal router HTTP filter
// (envoy.extensions.filters.http.router.v3.Router) that grpc-go requires as
// the last entry of an HttpConnectionManager's http_filters.
func RouterFilter() *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{
		Name:       "envoy.filters.http.router",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
	}
}

func apiListener(name, routeConfigName string, filters []*hcmv3.HttpFilter) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsSource(),
			RouteConfigName: routeConfigName,
		}},
		HttpFilters: filters,
	}
	return &listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(hcm)},
	}
}

// Listener returns a client-side (API) Listener named name. Its
// HttpConnectionManager fetches RouteConfiguration routeConfigName by RDS over
// ADS and has the router filter as its only (and so last) HTTP filter.
//
// For a client dialing "xds:///NAME", grpc-go subscribes to the Listener
// called NAME (the default client_default_listener_resource_name_template is
// "%s").
func Listener(name, routeConfigName string) *listenerv3.Listener {
	return apiListener(name, routeConfigName, []*hcmv3.HttpFilter{RouterFilter()})
}

// RouteConfig returns a RouteConfiguration named name with one virtual host
// whose only domain is vhostDomain and whose only route sends every path
// (prefix "/") to clusterName.
//
// grpc-go picks the virtual host by the channel's authority, which for
// "xds:///NAME" is NAME, so vhostDomain is normally the listener name ("*"
// matches any authority).
func RouteConfig(name, vhostDomain, clusterName string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "vhost-" + name,
			Domains: []string{vhostDomain},
			Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusterName},
				}},
			}},
		}},
	}
}

// Cluster returns an EDS Cluster named name, with round robin load balancing,
// whose endpoints come by EDS over ADS. The ClusterLoadAssignment grpc-go then
// asks for is named edsServiceName, or name when edsServiceName is empty.
func Cluster(name, edsServiceName string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig:   adsSource(),
			ServiceName: edsServiceName,
		},
		LbPolicy: clusterv3.Cluster_ROUND_ROBIN,
	}
}

// Endpoints returns a ClusterLoadAssignment named clusterName (the Cluster's
// name, or its EDS service name when it has one) with one locality of weight
// 1 holding one HEALTHY endpoint per address. Each address is "host:port"
// with an IP host, e.g. the address [StartBackend] returns; a malformed
// address panics, as it is a bug in the test.
//
// The locality weight matters: grpc-go silently drops localities without a
// load_balancing_weight, leaving the cluster with no endpoints.
func Endpoints(clusterName string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	lbEndpoints := make([]*endpointv3.LbEndpoint, 0, len(addrs))
	for _, addr := range addrs {
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			panic(fmt.Sprintf("xdstest.Endpoints: address %q: %v", addr, err))
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			panic(fmt.Sprintf("xdstest.Endpoints: address %q: bad port: %v", addr, err))
		}
		lbEndpoints = append(lbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
					SocketAddress: &corev3.SocketAddress{
						Protocol:      corev3.SocketAddress_TCP,
						Address:       host,
						PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
					},
				}},
			}},
			HealthStatus:        corev3.HealthStatus_HEALTHY,
			LoadBalancingWeight: wrapperspb.UInt32(1),
		})
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: clusterName,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{Region: "xdstest", Zone: "xdstest-a"},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints:         lbEndpoints,
		}},
	}
}

// NackListener returns a Listener that grpc-go NACKs: it is [Listener] with
// an empty http_filters list. grpc-go requires a terminal filter (the router)
// at the end of the filter chain (gRFC A39), so it rejects the resource with
// the short reason [NackListenerReason]; the full error_detail message is
//
//	error parsing "ListenerResource" response: resource "<name>": http filters list is empty
//
// A listener was chosen because its NACK text is short and stable: most other
// rejections (e.g. [NackCluster]) append the whole resource in proto text
// form, which is unstable by design.
func NackListener(name, routeConfigName string) *listenerv3.Listener {
	return apiListener(name, routeConfigName, nil)
}

// NackCluster returns a Cluster that grpc-go NACKs: it is [Cluster] with
// lb_policy RANDOM, a policy grpc-go does not implement (it accepts
// ROUND_ROBIN, RING_HASH, LEAST_REQUEST, or load_balancing_policy). The
// error_detail message is
//
//	error parsing "ClusterResource" response: resource "<name>": unexpected lbPolicy RANDOM in response: <the Cluster in proto text form>
//
// so match it on [NackClusterReason].
func NackCluster(name, edsServiceName string) *clusterv3.Cluster {
	c := Cluster(name, edsServiceName)
	c.LbPolicy = clusterv3.Cluster_RANDOM
	return c
}

// Resources is the set of four resources a grpc-go client needs to reach
// backends through a target, as built by [DefaultResources].
type Resources struct {
	Listener    *listenerv3.Listener
	RouteConfig *routev3.RouteConfiguration
	Cluster     *clusterv3.Cluster
	Endpoints   *endpointv3.ClusterLoadAssignment
}

// DefaultResources returns the resources that route "xds:///<target>" to
// addrs: Listener target -> RouteConfiguration "route-<target>" (virtual
// host domain target) -> Cluster "cluster-<target>" -> ClusterLoadAssignment
// "cluster-<target>" (no EDS service name) with addrs.
func DefaultResources(target string, addrs ...string) Resources {
	route := "route-" + target
	cluster := "cluster-" + target
	return Resources{
		Listener:    Listener(target, route),
		RouteConfig: RouteConfig(route, target, cluster),
		Cluster:     Cluster(cluster, ""),
		Endpoints:   Endpoints(cluster, addrs...),
	}
}

// ByType returns the resources keyed by type URL, then by resource name, the
// shape a state-of-the-world server answers from.
func (r Resources) ByType() map[string]map[string]proto.Message {
	return map[string]map[string]proto.Message{
		ListenerType:    {r.Listener.GetName(): r.Listener},
		RouteConfigType: {r.RouteConfig.GetName(): r.RouteConfig},
		ClusterType:     {r.Cluster.GetName(): r.Cluster},
		EndpointsType:   {r.Endpoints.GetClusterName(): r.Endpoints},
	}
}
