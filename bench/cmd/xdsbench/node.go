package main

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The -node choices: what each client's node holds.
const (
	nodeMinimal = "minimal" // an id and a cluster
	nodeEnvoy   = "envoy"   // what an Envoy sends: see envoyNode
)

// envoyExtensionCategories are categories of the extensions an Envoy build
// lists in its node, with how many of each a full build registers (about
// the counts of an Envoy 1.3x release build).
var envoyExtensionCategories = []struct {
	name string
	n    int
}{
	{"envoy.filters.http", 70}, {"envoy.filters.network", 22}, {"envoy.filters.listener", 6},
	{"envoy.transport_sockets.upstream", 12}, {"envoy.transport_sockets.downstream", 8},
	{"envoy.access_loggers", 10}, {"envoy.clusters", 12}, {"envoy.load_balancing_policies", 9},
	{"envoy.tracers", 8}, {"envoy.stats_sinks", 7}, {"envoy.matching.common_inputs", 10},
	{"envoy.matching.http.input", 12}, {"envoy.matching.input_matchers", 5}, {"envoy.health_checkers", 5},
	{"envoy.resource_monitors", 4}, {"envoy.retry_host_predicates", 3}, {"envoy.rate_limit_descriptors", 2},
	{"envoy.http.stateful_session", 2}, {"envoy.http.original_ip_detection", 2}, {"envoy.compression.compressor", 4},
	{"envoy.compression.decompressor", 4}, {"envoy.formatter", 5}, {"envoy.upstreams", 6},
	{"envoy.grpc_credentials", 3}, {"envoy.udp_packet_writer", 2}, {"envoy.quic.proof_source", 2},
	{"envoy.thrift_proxy.filters", 4}, {"envoy.dubbo_proxy.filters", 2}, {"envoy.wasm.runtime", 3},
	{"envoy.bootstrap", 6}, {"envoy.config.validators", 2}, {"envoy.config_subscription", 10},
	{"envoy.regex_engines", 1}, {"envoy.path.match", 1}, {"envoy.path.rewrite", 1},
	{"envoy.http.custom_response", 2}, {"envoy.route.early_data_policy", 1}, {"envoy.tls.cert_validator", 2},
	{"envoy.watchdog_actions", 2}, {"envoy.network.dns_resolver", 3}, {"envoy.guarddog_actions", 2},
}

// envoyNode returns the node an Envoy sends on its ADS stream: besides its
// id and cluster, the user agent and build, the client features an Envoy
// announces, and the list of every extension compiled in, which makes the
// node some 40 KB: servers keep it per stream, and an Envoy repeats it in
// every request unless told not to (set_node_on_first_message_only).
func envoyNode(id string) *corev3.Node {
	n := &corev3.Node{
		Id:            id,
		Cluster:       nodeCluster,
		UserAgentName: "envoy",
		UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
			Version: &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 36, Patch: 2},
			Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
				"revision.sha":    structpb.NewStringValue("4a3b1e7f0c9d8e2a6b5c4d3e2f1a0b9c8d7e6f5a"),
				"revision.status": structpb.NewStringValue("Clean"),
				"build.type":      structpb.NewStringValue("RELEASE"),
				"ssl.version":     structpb.NewStringValue("BoringSSL"),
			}},
		}},
		ClientFeatures: []string{
			"envoy.config.require-any-fields-contain-struct",
			"envoy.lb.does_not_support_overprovisioning",
			"envoy.lrs.supports_send_all_clusters",
			"xds.config.supports-resource-ttl",
		},
		Locality: &corev3.Locality{Region: "region-1", Zone: "zone-a"},
	}
	for _, c := range envoyExtensionCategories {
		for i := range c.n {
			name := fmt.Sprintf("%s.extension_%d", c.name, i)
			n.Extensions = append(n.Extensions, &corev3.Extension{
				Name:     name,
				Category: c.name,
				TypeUrls: []string{"envoy.extensions." + name[len("envoy."):] + ".v3.Config"},
			})
		}
	}
	return n
}

// envoyNodeBase is the part of envoyNode every client shares: the fleet's
// nodes differ only in their ids, and marshaling only reads a message.
var envoyNodeBase = envoyNode("")

// newNode returns client id's node of the given kind.
func newNode(kind string, id int) *corev3.Node {
	name := fmt.Sprintf("xdsbench-%d", id)
	if kind != nodeEnvoy {
		return &corev3.Node{Id: name, Cluster: nodeCluster}
	}
	b := envoyNodeBase
	return &corev3.Node{
		Id: name, Cluster: b.Cluster, UserAgentName: b.UserAgentName, UserAgentVersionType: b.UserAgentVersionType,
		ClientFeatures: b.ClientFeatures, Locality: b.Locality, Extensions: b.Extensions,
	}
}
