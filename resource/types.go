package resource

import (
	"sort"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
)

// TypeURL prefix shared by every xDS resource type.
const typePrefix = "type.googleapis.com/"

// The v3 type URLs xdsd serves (PROTOCOL T3).
const (
	ListenerType    = typePrefix + "envoy.config.listener.v3.Listener"
	RouteType       = typePrefix + "envoy.config.route.v3.RouteConfiguration"
	ScopedRouteType = typePrefix + "envoy.config.route.v3.ScopedRouteConfiguration"
	VirtualHostType = typePrefix + "envoy.config.route.v3.VirtualHost"
	ClusterType     = typePrefix + "envoy.config.cluster.v3.Cluster"
	EndpointType    = typePrefix + "envoy.config.endpoint.v3.ClusterLoadAssignment"
	SecretType      = typePrefix + "envoy.extensions.transport_sockets.tls.v3.Secret"
	RuntimeType     = typePrefix + "envoy.service.runtime.v3.Runtime"
	ExtensionType   = typePrefix + "envoy.config.core.v3.TypedExtensionConfig"
)

// Type describes one xDS resource type. Types are values in a fixed table;
// compare them by pointer or by URL.
type Type struct {
	// URL is the type URL, "type.googleapis.com/" plus the message name.
	URL string
	// Short is the conventional short name: "lds", "cds", ...
	Short string
	// FullState is true for Listener and Cluster (PROTOCOL S9) and for
	// ScopedRouteConfiguration (Envoy drops every scope a SotW response
	// leaves out): every SotW response carries every resource the
	// subscription covers.
	FullState bool
	// Wildcard is true for the types whose empty subscription means "*"
	// until a name is first sent (PROTOCOL S8, D3): Listener, Cluster and,
	// as Envoy subscribes to them that way, ScopedRouteConfiguration.
	Wildcard bool
	// Order is the position of this type in an ADS push (PROTOCOL O1):
	// lower goes first. Removals go in RemovalOrder after every upsert.
	Order int
	// RemovalOrder is the position of this type's removals, which follow
	// every upsert: the referrer (listener) goes before what it refers to
	// (routes, clusters), and endpoints go last.
	RemovalOrder int
	// Rewarms is the type of the resources that an updated resource of
	// this type depends on and must be sent again after it, because its
	// warming ends only with them: a Cluster's ClusterLoadAssignment
	// (PROTOCOL O2). Nil for the other types.
	Rewarms *Type

	rewarms    string // Rewarms' URL, resolved once the table is made
	newMessage func() proto.Message
	name       func(proto.Message) string
}

// NameOf returns the name of a message of this type: its name field, or
// cluster_name for a ClusterLoadAssignment.
func (t *Type) NameOf(m proto.Message) string { return t.name(m) }

// New returns an empty message of this type.
func (t *Type) New() proto.Message { return t.newMessage() }

// String returns the short name.
func (t *Type) String() string { return t.Short }

var types = []*Type{
	{URL: ClusterType, Short: "cds", FullState: true, Wildcard: true, Order: 0, RemovalOrder: 6, rewarms: EndpointType,
		newMessage: func() proto.Message { return new(clusterv3.Cluster) },
		name:       func(m proto.Message) string { return m.(*clusterv3.Cluster).GetName() }},
	{URL: EndpointType, Short: "eds", Order: 1, RemovalOrder: 7,
		newMessage: func() proto.Message { return new(endpointv3.ClusterLoadAssignment) },
		name:       func(m proto.Message) string { return m.(*endpointv3.ClusterLoadAssignment).GetClusterName() }},
	{URL: SecretType, Short: "sds", Order: 2, RemovalOrder: 5,
		newMessage: func() proto.Message { return new(tlsv3.Secret) },
		name:       func(m proto.Message) string { return m.(*tlsv3.Secret).GetName() }},
	{URL: ExtensionType, Short: "ecds", Order: 3, RemovalOrder: 4,
		newMessage: func() proto.Message { return new(corev3.TypedExtensionConfig) },
		name:       func(m proto.Message) string { return m.(*corev3.TypedExtensionConfig).GetName() }},
	{URL: ListenerType, Short: "lds", FullState: true, Wildcard: true, Order: 4, RemovalOrder: 0,
		newMessage: func() proto.Message { return new(listenerv3.Listener) },
		name:       func(m proto.Message) string { return m.(*listenerv3.Listener).GetName() }},
	{URL: RouteType, Short: "rds", Order: 5, RemovalOrder: 2,
		newMessage: func() proto.Message { return new(routev3.RouteConfiguration) },
		name:       func(m proto.Message) string { return m.(*routev3.RouteConfiguration).GetName() }},
	{URL: ScopedRouteType, Short: "srds", FullState: true, Wildcard: true, Order: 6, RemovalOrder: 1,
		newMessage: func() proto.Message { return new(routev3.ScopedRouteConfiguration) },
		name:       func(m proto.Message) string { return m.(*routev3.ScopedRouteConfiguration).GetName() }},
	{URL: VirtualHostType, Short: "vhds", Order: 7, RemovalOrder: 3,
		newMessage: func() proto.Message { return new(routev3.VirtualHost) },
		name:       func(m proto.Message) string { return m.(*routev3.VirtualHost).GetName() }},
	{URL: RuntimeType, Short: "rtds", Order: 8, RemovalOrder: 8,
		newMessage: func() proto.Message { return new(runtimev3.Runtime) },
		name:       func(m proto.Message) string { return m.(*runtimev3.Runtime).GetName() }},
}

// NumTypes is the number of types; every Order and RemovalOrder is below
// it, so that per-type state can be an array indexed by Order.
const NumTypes = 9

var byURL = func() map[string]*Type {
	m := make(map[string]*Type, len(types))
	for _, t := range types {
		if t.Order >= NumTypes || t.RemovalOrder >= NumTypes {
			panic("resource: NumTypes is less than the types' orders")
		}
		m[t.URL] = t
	}
	for _, t := range types {
		if t.rewarms != "" {
			t.Rewarms = m[t.rewarms]
		}
	}
	return m
}()

// Lookup returns the type with the given URL, or nil if xdsd does not serve it.
func Lookup(url string) *Type { return byURL[url] }

// LookupShort returns the type with the given short name ("cds", ...), or nil.
func LookupShort(short string) *Type {
	for _, t := range types {
		if t.Short == short {
			return t
		}
	}
	return nil
}

// Types returns every type in ADS upsert order.
func Types() []*Type {
	out := append([]*Type(nil), types...)
	sort.Slice(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out
}

// RemovalTypes returns every type in ADS removal order (RemovalOrder).
func RemovalTypes() []*Type {
	out := append([]*Type(nil), types...)
	sort.Slice(out, func(i, j int) bool { return out[i].RemovalOrder < out[j].RemovalOrder })
	return out
}
