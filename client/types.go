package client

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/resource"
)

// The gRPC methods of the aggregated service.
const (
	adsSotWMethod  = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	adsDeltaMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
)

// methods holds the per-type services' methods by type URL: SotW, delta.
// An empty method means the variant does not exist (VHDS is delta only).
var methods = map[string][2]string{
	resource.ListenerType:    {"/envoy.service.listener.v3.ListenerDiscoveryService/StreamListeners", "/envoy.service.listener.v3.ListenerDiscoveryService/DeltaListeners"},
	resource.RouteType:       {"/envoy.service.route.v3.RouteDiscoveryService/StreamRoutes", "/envoy.service.route.v3.RouteDiscoveryService/DeltaRoutes"},
	resource.ScopedRouteType: {"/envoy.service.route.v3.ScopedRoutesDiscoveryService/StreamScopedRoutes", "/envoy.service.route.v3.ScopedRoutesDiscoveryService/DeltaScopedRoutes"},
	resource.VirtualHostType: {"", "/envoy.service.route.v3.VirtualHostDiscoveryService/DeltaVirtualHosts"},
	resource.ClusterType:     {"/envoy.service.cluster.v3.ClusterDiscoveryService/StreamClusters", "/envoy.service.cluster.v3.ClusterDiscoveryService/DeltaClusters"},
	resource.EndpointType:    {"/envoy.service.endpoint.v3.EndpointDiscoveryService/StreamEndpoints", "/envoy.service.endpoint.v3.EndpointDiscoveryService/DeltaEndpoints"},
	resource.SecretType:      {"/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets", "/envoy.service.secret.v3.SecretDiscoveryService/DeltaSecrets"},
	resource.RuntimeType:     {"/envoy.service.runtime.v3.RuntimeDiscoveryService/StreamRuntime", "/envoy.service.runtime.v3.RuntimeDiscoveryService/DeltaRuntime"},
	resource.ExtensionType:   {"/envoy.service.extension.v3.ExtensionConfigDiscoveryService/StreamExtensionConfigs", "/envoy.service.extension.v3.ExtensionConfigDiscoveryService/DeltaExtensionConfigs"},
}

// method returns the method of the stream that carries typeURL.
func method(ads, delta bool, typeURL string) (string, error) {
	i := 0
	if delta {
		i = 1
	}
	if ads {
		return [2]string{adsSotWMethod, adsDeltaMethod}[i], nil
	}
	m := methods[typeURL][i]
	if m == "" {
		return "", fmt.Errorf("client: no per-type %s service for %s; use ADS", [2]string{"SotW", "delta"}[i], typeURL)
	}
	return m, nil
}

// typeInfo is what the client knows of one resource type. Read-only.
type typeInfo struct {
	url string
	// fullState: SotW responses carry every resource (Listener, Cluster);
	// one missing is deleted (C3).
	fullState bool
	// wildcard: an empty SotW subscription means "*" (PROTOCOL S8).
	wildcard bool
	msg      protoreflect.MessageType
}

// lookupType returns the type for url: xdsd's registry for the flags, the
// protobuf registry for decoding (any linked-in message type works on ADS).
func lookupType(url string) (*typeInfo, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	if err != nil {
		return nil, fmt.Errorf("client: resource type %s: %w", url, err)
	}
	ti := &typeInfo{url: url, msg: mt}
	if t := resource.Lookup(url); t != nil {
		ti.fullState, ti.wildcard = t.FullState, t.Wildcard
	}
	return ti, nil
}

// nameOf returns a resource's name: what xdsd's registry says for the
// types it knows, otherwise the "name" field every other xDS resource has.
func nameOf(m proto.Message) string {
	r := m.ProtoReflect()
	if t := resource.Lookup("type.googleapis.com/" + string(r.Descriptor().FullName())); t != nil {
		return t.NameOf(m)
	}
	f := r.Descriptor().Fields().ByName("name")
	if f == nil || f.Kind() != protoreflect.StringKind {
		return ""
	}
	return r.Get(f).String()
}

// dependents returns the type URL and names of the resources that m, a
// Listener or Cluster, makes the client fetch (C3): its RouteConfigurations
// or its ClusterLoadAssignment.
func dependents(m proto.Message) (string, []string) {
	t, names := resource.Dependencies(m)
	if t == nil {
		return "", nil
	}
	return t.URL, names
}
