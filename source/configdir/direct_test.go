package configdir

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xdsd/xdsd/source/configdir/internal/yamlsubset"
)

// directSeeds are inputs at the edges of what decodeDirect takes.
var directSeeds = []string{
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, connect_timeout: 1.5s, type: EDS, lb_policy: 3, per_connection_buffer_limit_bytes: 32768}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, connectTimeout: -0.000000001s, common_lb_config: {healthy_panic_threshold: {value: 50.5}}}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, connect_timeout: 01s}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, connect_timeout: .5s}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, connect_timeout: 315576000001s}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, connect_timeout: 1.1234567891s}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, clusterName: b, cluster_name: c}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, type: STATIC, cluster_type: {name: x}}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, max_requests_per_connection: 4294967296}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, max_requests_per_connection: -1}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, metadata: {filter_metadata: {x: {y: 1}}}}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, lb_policy: 99}`,
	`{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: "\u00e9", alt_stat_name: null}`,
	`{"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, cluster_name: a, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}, load_balancing_weight: 3}]}], policy: {overprovisioning_factor: 140}}`,
	`{"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, cluster_name: a, endpoints: [{lb_endpoints: [], priority: 1}, {locality: {zone: z}}]}`,
	`{"@type": type.googleapis.com/envoy.config.listener.v3.Listener, name: l, address: {socket_address: {address: 0.0.0.0, port_value: 10000}}, filter_chains: [{filters: [{name: envoy.filters.network.http_connection_manager, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefix: in, rds: {route_config_name: r, config_source: {ads: {}, resource_api_version: V3}}, http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]}}]}]}`,
	`{"@type": type.googleapis.com/envoy.config.listener.v3.Listener, name: l, filter_chains: [{filters: [{name: x, typed_config: {"@type": type.googleapis.com/google.protobuf.Duration, value: 1s}}]}]}`,
	`{"@type": type.googleapis.com/envoy.config.listener.v3.Listener, name: l, filter_chains: [{filters: [{name: x, typed_config: {"@type": type.googleapis.com/udpa.type.v1.TypedStruct, type_url: x, value: {a: 1}}}]}]}`,
	`{"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration, name: r, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: a, timeout: 0s}}], typed_per_filter_config: {x: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}}]}`,
	`{"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret, name: s, generic_secret: {secret: {inline_string: x}}}`,
	`{"@type": type.googleapis.com/envoy.service.runtime.v3.Runtime, name: rt, layer: {a: 1, b: [x]}}`,
}

// FuzzDecodeDirect: wherever decodeDirect decodes a message, it decodes
// the message protojson decodes from the values' JSON encoding, to the
// byte: every mapping with an "@type" of a known message, in every file.
func FuzzDecodeDirect(f *testing.F) {
	for _, s := range directSeeds {
		f.Add("seed.yaml", []byte(s))
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*", "*", "*.yaml"))
	for _, p := range append(files, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(filepath.Base(p), b)
		}
	}
	f.Add("seed.json", []byte(`{"resources": [{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "a", "per_connection_buffer_limit_bytes": 10, "max_requests_per_connection": 1e3, "connect_timeout": "2s"}]}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if !strings.HasSuffix(name, ".json") {
			name = "f.yaml"
		}
		docs, err := decodeDocs(name, data)
		if err != nil {
			return
		}
		for _, d := range docs {
			eachTyped(d, func(m any) { checkDirect(t, m) })
		}
	})
}

// eachTyped calls f with every mapping under v (a map or a Mapping) that
// has an "@type".
func eachTyped(v any, f func(any)) {
	if typ, ok := field(v, "@type"); ok {
		if _, ok := typ.(string); ok {
			f(v)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			eachTyped(e, f)
		}
	case *yamlsubset.Mapping:
		for _, e := range x.Entries {
			eachTyped(e.Value, f)
		}
	case []any:
		for _, e := range x {
			eachTyped(e, f)
		}
	}
}

// checkDirect decodes v, a mapping with an "@type", both ways; and, if v
// is a Mapping, directly as the map it stands for too.
func checkDirect(t *testing.T, v any) {
	t.Helper()
	typ, _ := field(v, "@type")
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(typ.(string))
	if err != nil || mt.Descriptor().FullName().Parent() == "google.protobuf" {
		return
	}
	fields := maps.Clone(yamlsubset.Plain(v).(map[string]any))
	delete(fields, "@type")
	direct := mt.New()
	took := decodeDirect(v, direct)
	opts := proto.MarshalOptions{Deterministic: true}
	if _, ordered := v.(*yamlsubset.Mapping); ordered {
		fromMap := mt.New()
		if tookMap := decodeDirect(fields, fromMap); tookMap != took {
			t.Fatalf("decodeDirect took the Mapping %v: %v, the map: %v", v, took, tookMap)
		}
		a, _ := opts.Marshal(direct.Interface())
		b, _ := opts.Marshal(fromMap.Interface())
		if took && string(a) != string(b) {
			t.Fatalf("%v: decodeDirect's message from the Mapping encodes as\n%x\nfrom the map as\n%x", v, a, b)
		}
	}
	if !took {
		return
	}
	js, err := json.Marshal(fields)
	if err != nil {
		t.Fatalf("decodeDirect took %v, which has no JSON encoding: %v", fields, err)
	}
	slow := mt.New().Interface()
	if err := protojson.Unmarshal(js, slow); err != nil {
		t.Fatalf("decodeDirect took %s, which protojson refuses: %v", js, err)
	}
	a, _ := opts.Marshal(direct.Interface())
	b, _ := opts.Marshal(slow)
	if !proto.Equal(direct.Interface(), slow) { // the fast check; the diff only to report
		t.Fatalf("%s: decodeDirect and protojson differ (-protojson +decodeDirect):\n%s", js, cmp.Diff(slow, direct.Interface(), protocmp.Transform()))
	}
	if string(a) != string(b) {
		t.Fatalf("%s: decodeDirect's message encodes as\n%x\nprotojson's as\n%x", js, a, b)
	}
}

// TestDecodeDirectTakes: the shapes of configuration most files hold are
// decoded directly, not by the round trip.
func TestDecodeDirectTakes(t *testing.T) {
	for _, i := range []int{0, 1, 13, 14, 15, 18, 19} {
		if !takenDirectly(t, directSeeds[i]) {
			t.Errorf("seed %d was not decoded directly: %s", i, directSeeds[i])
		}
	}
}

// TestDecodeDirectLong: messages whose encodings need lengths of two and
// three bytes, inside lists and an Any, decode as protojson decodes them.
func TestDecodeDirectLong(t *testing.T) {
	for _, n := range []int{3, 30, 1000} {
		eps := make([]string, n)
		for i := range eps {
			eps[i] = fmt.Sprintf("{endpoint: {address: {socket_address: {address: 10.0.%d.%d, port_value: %d}}}, load_balancing_weight: %d}", i/250, i%250, 1000+i, i+1)
		}
		cla := `{"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment, cluster_name: a, endpoints: [{lb_endpoints: [` + strings.Join(eps, ", ") + `]}]}`
		listener := fmt.Sprintf(`{"@type": type.googleapis.com/envoy.config.listener.v3.Listener, name: l, filter_chains: [{filters: [{name: x, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: %s, cluster: c}}]}]}`, strings.Repeat("s", n*20))
		for _, in := range []string{cla, listener} {
			if !takenDirectly(t, in) {
				t.Errorf("not decoded directly: %.200s", in)
			}
		}
	}
}

// takenDirectly decodes in, one mapping with an "@type", both ways, and
// reports whether decodeDirect took it.
func takenDirectly(t *testing.T, in string) bool {
	t.Helper()
	docs, err := decodeDocs("f.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	m := docs[0]
	typ, _ := field(m, "@type")
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(typ.(string))
	if err != nil {
		t.Fatal(err)
	}
	checkDirect(t, m)
	return decodeDirect(m, mt.New())
}

// FuzzParseOrdered: a file parses alike from the Mappings its YAML decodes
// to and from the maps they stand for, as go.yaml.in/yaml/v3 decodes them.
func FuzzParseOrdered(f *testing.F) {
	for _, s := range directSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		"resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n  type: EDS\n  connect_timeout: 1s\n  eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}\n",
		"resources:\n- ttl: 30s\n  resource: {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: c}\nnodes: {cluster: a}\n",
		"static_resources:\n  clusters:\n  - {name: c, connect_timeout: 1s}\n",
		"type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster\nresources:\n- {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: c, bogus: 1}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := decodeDocs("f.yaml", data)
		if err != nil {
			return
		}
		plain := make([]any, len(docs))
		for i, d := range docs {
			plain[i] = yamlsubset.Plain(d)
		}
		got, gotProbs := parseDocs("f.yaml", docs)
		want, wantProbs := parseDocs("f.yaml", plain)
		if !slices.Equal(gotProbs, wantProbs) {
			t.Fatalf("%q: from Mappings %v, from maps %v", data, gotProbs, wantProbs)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d resources from Mappings, %d from maps", data, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.res.Name != w.res.Name || g.res.Version != w.res.Version || g.res.TTL != w.res.TTL || g.index != w.index || !reflect.DeepEqual(g.sel, w.sel) {
				t.Fatalf("%q: resource %d is %s %s from Mappings, %s %s from maps", data, i, g.res.Name, g.res.Version, w.res.Name, w.res.Version)
			}
		}
	})
}
