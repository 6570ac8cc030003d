package resource

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Dependencies returns the type and names of the resources m depends on and
// that a client fetches separately because of it: a cluster's
// ClusterLoadAssignment (EDS), a listener's RouteConfigurations (RDS).
// Other messages have none.
func Dependencies(m proto.Message) (*Type, []string) {
	switch m := m.(type) {
	case *clusterv3.Cluster:
		if n, ok := EDSName(m); ok {
			return Lookup(EndpointType), []string{n}
		}
	case *listenerv3.Listener:
		if names := RouteNames(m); len(names) > 0 {
			return Lookup(RouteType), names
		}
	}
	return nil, nil
}

// adsDependencies is Dependencies without what a client fetches from a
// config source other than the stream it got m on (a file, or an
// api_config_source of its own): the dependencies the ADS ordering waits
// for (PROTOCOL O1).
func adsDependencies(m proto.Message) (*Type, []string) {
	switch m := m.(type) {
	case *clusterv3.Cluster:
		if n, ok := EDSName(m); ok && sameSource(m.GetEdsClusterConfig().GetEdsConfig()) {
			return Lookup(EndpointType), []string{n}
		}
	case *listenerv3.Listener:
		if names := routeNames(m, true); len(names) > 0 {
			return Lookup(RouteType), names
		}
	}
	return nil, nil
}

// sameSource reports whether a config source is the stream the resource
// naming it came on: ads, self, or none given.
func sameSource(c *corev3.ConfigSource) bool {
	switch c.GetConfigSourceSpecifier().(type) {
	case *corev3.ConfigSource_Path, *corev3.ConfigSource_PathConfigSource, *corev3.ConfigSource_ApiConfigSource:
		return false
	}
	return true
}

// RouteNames returns the RouteConfiguration names a listener's
// HttpConnectionManagers fetch over RDS, from its filter chains and its
// ApiListener.
func RouteNames(l *listenerv3.Listener) []string { return routeNames(l, false) }

// routeNames is RouteNames, with only the names fetched from the same
// source as the listener if sameOnly.
func routeNames(l *listenerv3.Listener, sameOnly bool) []string {
	var out []string
	add := func(a *anypb.Any) {
		if a.GetTypeUrl() != typePrefix+"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
			return
		}
		var hcm hcmv3.HttpConnectionManager
		if a.UnmarshalTo(&hcm) == nil {
			if n := hcm.GetRds().GetRouteConfigName(); n != "" && (!sameOnly || sameSource(hcm.GetRds().GetConfigSource())) {
				out = append(out, n)
			}
		}
	}
	add(l.GetApiListener().GetApiListener())
	chains := l.GetFilterChains()
	if dc := l.GetDefaultFilterChain(); dc != nil {
		chains = append(chains[:len(chains):len(chains)], dc)
	}
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			add(f.GetTypedConfig())
		}
	}
	return out
}
