package resource

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
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

// RouteNames returns the RouteConfiguration names a listener's
// HttpConnectionManagers fetch over RDS, from its filter chains and its
// ApiListener.
func RouteNames(l *listenerv3.Listener) []string {
	var out []string
	add := func(a *anypb.Any) {
		if a.GetTypeUrl() != typePrefix+"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
			return
		}
		var hcm hcmv3.HttpConnectionManager
		if a.UnmarshalTo(&hcm) == nil {
			if n := hcm.GetRds().GetRouteConfigName(); n != "" {
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
