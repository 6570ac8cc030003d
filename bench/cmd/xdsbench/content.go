package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Type URLs of the two resource types the clients subscribe to.
const (
	clusterTypeURL  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	endpointTypeURL = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// clusterPrefix starts the name of every cluster and of its endpoint set:
// cluster i is called clusterPrefix + i.
const clusterPrefix = "cluster-"

// nodeCluster is the node.cluster of every client: a server may use it to put
// all clients in one group.
const nodeCluster = "xdsbench"

// clusterName returns the name of the i-th cluster and of its endpoint set.
func clusterName(i int) string { return clusterPrefix + strconv.Itoa(i) }

// clusterIndex returns i for a name made by clusterName, if i < n.
func clusterIndex(name string, n int) (int, error) {
	s, ok := strings.CutPrefix(name, clusterPrefix)
	if !ok {
		return 0, fmt.Errorf("unexpected resource name %q", name)
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= n {
		return 0, fmt.Errorf("unexpected resource name %q", name)
	}
	return i, nil
}

// The content of endpoint set i at generation gen (0 initially; round r of a
// run writes generation r into the sets it changes): one locality with
// `endpoints` endpoints 10.a.b.(j+1):8080, where the first endpoint's port is
// 20000+gen and its load-balancing weight is gen+1. That weight is the
// marker the clients read (see parseCLA) to tell which generation they hold.
func endpointAddr(i, j int) string {
	return fmt.Sprintf("10.%d.%d.%d", (i>>8)&255, i&255, j%250+1)
}

func endpointPort(j, gen int) uint32 {
	if j == 0 {
		return uint32(20000 + gen%40000)
	}
	return 8080
}

// newCluster returns cluster i: EDS over ADS.
func newCluster(i int) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 clusterName(i),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		ConnectTimeout:       durationpb.New(time.Second),
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}},
	}
}

// newCLA returns endpoint set i at generation gen.
func newCLA(i, endpoints, gen int) *endpointv3.ClusterLoadAssignment {
	lbs := make([]*endpointv3.LbEndpoint, endpoints)
	for j := range lbs {
		lb := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address:       endpointAddr(i, j),
				PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: endpointPort(j, gen)},
			}}},
		}}}
		if j == 0 {
			lb.LoadBalancingWeight = wrapperspb.UInt32(uint32(gen) + 1)
		}
		lbs[j] = lb
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: clusterName(i),
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{Region: "bench", Zone: "bench-a"},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints:         lbs,
		}},
	}
}

// clusterYAML is cluster i as an operator writes it in the configuration
// directory; it decodes to newCluster(i).
func clusterYAML(i int) []byte {
	return fmt.Appendf(nil, `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %s
  type: EDS
  connect_timeout: 1s
  eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
`, clusterName(i))
}

// claYAML is endpoint set i at generation gen as an operator writes it; it
// decodes to newCLA(i, endpoints, gen).
func claYAML(i, endpoints, gen int) []byte {
	b := fmt.Appendf(nil, `resources:
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: %s
  endpoints:
  - locality: {region: bench, zone: bench-a}
    load_balancing_weight: 1
    lb_endpoints:
`, clusterName(i))
	for j := range endpoints {
		b = fmt.Appendf(b, "    - endpoint: {address: {socket_address: {address: %s, port_value: %d}}}\n",
			endpointAddr(i, j), endpointPort(j, gen))
		if j == 0 {
			b = fmt.Appendf(b, "      load_balancing_weight: %d\n", gen+1)
		}
	}
	return b
}

// Paths in the configuration directory: one file per cluster and one per
// endpoint set, as operators lay it out at scale.
func clusterFile(dir string, i int) string {
	return filepath.Join(dir, "clusters", "cluster-"+strconv.Itoa(i)+".yaml")
}

func claFile(dir string, i int) string {
	return filepath.Join(dir, "endpoints", "cla-"+strconv.Itoa(i)+".yaml")
}

// writeConfigDir lays out the initial configuration of `clusters` clusters
// under dir.
func writeConfigDir(dir string, clusters, endpoints int) error {
	for _, sub := range []string{"clusters", "endpoints"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	for i := range clusters {
		if err := os.WriteFile(clusterFile(dir, i), clusterYAML(i), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(claFile(dir, i), claYAML(i, endpoints, 0), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// stageCLA writes endpoint set i at generation gen to a temporary file whose
// name starts with "." (ignored by xdsd) next to its final place, and
// returns the rename that puts it into place. With inPlace, it writes
// nothing and returns the write of the final file in place.
func stageCLA(dir string, i, endpoints, gen int, inPlace bool) (func() error, error) {
	final := claFile(dir, i)
	if inPlace {
		content := claYAML(i, endpoints, gen)
		return func() error { return os.WriteFile(final, content, 0o644) }, nil
	}
	tmp := filepath.Join(filepath.Dir(final), "."+filepath.Base(final)+".tmp")
	if err := os.WriteFile(tmp, claYAML(i, endpoints, gen), 0o644); err != nil {
		return nil, err
	}
	return func() error { return os.Rename(tmp, final) }, nil
}

var errNoMarker = errors.New("endpoint set without a generation marker (first endpoint's load_balancing_weight)")

// parseName returns field 1 of an encoded message: Cluster.name and
// ClusterLoadAssignment.cluster_name. It reads only the wire format, so that
// a client does not decode every resource it is sent.
func parseName(b []byte) (string, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", protowire.ParseError(n)
			}
			return string(v), nil
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		b = b[n:]
	}
	return "", errors.New("resource without a name")
}

// field returns the value of the first occurrence of field num (of wire
// type bytes) in an encoded message, and whether it is there.
func field(b []byte, num protowire.Number) ([]byte, bool, error) {
	for len(b) > 0 {
		n0, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false, protowire.ParseError(n)
		}
		b = b[n:]
		if n0 == num && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false, protowire.ParseError(n)
			}
			return v, true, nil
		}
		n = protowire.ConsumeFieldValue(n0, typ, b)
		if n < 0 {
			return nil, false, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil, false, nil
}

// parseMarker returns the generation of an encoded ClusterLoadAssignment
// made by newCLA: endpoints[0].lb_endpoints[0].load_balancing_weight - 1.
func parseMarker(cla []byte) (int32, error) {
	loc, ok, err := field(cla, 2) // ClusterLoadAssignment.endpoints
	if err != nil || !ok {
		return 0, cmpErr(err, errNoMarker)
	}
	lb, ok, err := field(loc, 2) // LocalityLbEndpoints.lb_endpoints
	if err != nil || !ok {
		return 0, cmpErr(err, errNoMarker)
	}
	w, ok, err := field(lb, 4) // LbEndpoint.load_balancing_weight
	if err != nil || !ok {
		return 0, cmpErr(err, errNoMarker)
	}
	for len(w) > 0 { // UInt32Value.value
		num, typ, n := protowire.ConsumeTag(w)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		w = w[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(w)
			if n < 0 {
				return 0, protowire.ParseError(n)
			}
			if v == 0 {
				return 0, errNoMarker
			}
			return int32(v - 1), nil
		}
		n = protowire.ConsumeFieldValue(num, typ, w)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		w = w[n:]
	}
	return 0, errNoMarker
}

// cmpErr returns err if it is not nil, else def.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}
