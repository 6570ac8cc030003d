package configdir_test

import (
	"fmt"
	"testing"

	"github.com/xdsd/xdsd/source/configdir"
)

// benchCluster and benchCLA are cluster i and its endpoint set (four
// endpoints, the first with port and weight given by gen), as xdsbench
// writes them into a configuration directory.
func benchCluster(i int) []byte {
	return fmt.Appendf(nil, `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: cluster-%d
  type: EDS
  connect_timeout: 1s
  eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
`, i)
}

func benchCLA(i, gen int) []byte {
	b := fmt.Appendf(nil, `resources:
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: cluster-%d
  endpoints:
  - locality: {region: bench, zone: bench-a}
    load_balancing_weight: 1
    lb_endpoints:
`, i)
	for j := range 4 {
		port := 8080
		if j == 0 {
			port = 20000 + gen
		}
		b = fmt.Appendf(b, "    - endpoint: {address: {socket_address: {address: 10.%d.%d.%d, port_value: %d}}}\n", (i>>8)&255, i&255, j+1, port)
		if j == 0 {
			b = fmt.Appendf(b, "      load_balancing_weight: %d\n", gen+1)
		}
	}
	return b
}

// BenchmarkParseFile measures parsing one configuration file: a cluster,
// and an endpoint set, each as xdsbench writes them.
func BenchmarkParseFile(b *testing.B) {
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"cluster", benchCluster(7)},
		{"endpoints", benchCLA(7, 3)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := configdir.ParseFile("f.yaml", c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
