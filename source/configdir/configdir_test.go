package configdir_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/fileout"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const cluster = `
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %s
  type: EDS
  eds_cluster_config: {eds_config: {ads: {}}}
`

const endpoints = `
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: %s
  endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}}]}]
`

func clusterYAML(name string, port int) string {
	return "resources:" + fmt.Sprintf(cluster, name) + fmt.Sprintf(endpoints, name, port)
}

// write replaces a file the way writers should: a dot-file renamed into
// place.
func write(t testing.TB, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(name))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, dir string) (*configdir.Result, error) {
	t.Helper()
	return configdir.NewLoader(dir).Load()
}

func problems(t *testing.T, err error) []configdir.Problem {
	t.Helper()
	var ce *configdir.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *configdir.Error", err)
	}
	return ce.Problems
}

func TestLoad(t *testing.T) {
	t.Run("formats_and_layout", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", clusterYAML("a", 1))
		write(t, dir, "sub/b.yml", "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: b\ntype: STATIC\n---\n\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c\n")
		write(t, dir, "d.json", `{"resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"d","connectTimeout":"1s"}]}`)
		write(t, dir, ".hidden.yaml", "garbage: [")
		write(t, dir, "notes.txt", "not configuration")
		res, err := load(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Resources) != 5 || res.Files != 3 {
			t.Fatalf("got %d resources from %d files, want 5 from 3", len(res.Resources), res.Files)
		}
	})

	// A TTL: ours, or Envoy's own wrapper.
	for _, content := range []string{`resources:
- ttl: 30s
  resource:
    "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
    name: a
`, `resources:
- "@type": type.googleapis.com/envoy.service.discovery.v3.Resource
  name: a
  version: "3"
  ttl: 30s
  resource:
    "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
    name: a
`, `{"resources": [{"@type": "type.googleapis.com/envoy.service.discovery.v3.Resource", "name": "",
  "ttl": "30s", "resource": {"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "a"}}]}`} {
		t.Run("ttl_wrapper", func(t *testing.T) {
			dir := t.TempDir()
			file := "a.yaml"
			if strings.HasPrefix(content, "{") {
				file = "a.json"
			}
			write(t, dir, file, content)
			res, err := load(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			if r := res.Resources[0]; r.Name != "a" || r.TTL != 30*time.Second {
				t.Fatalf("%s, ttl %v", r.Name, r.TTL)
			}
		})
	}

	// Envoy's files for filesystem subscriptions are DiscoveryResponses, and
	// so are xdsd's own --write-dir files (TestWriteDirFilesLoad).
	t.Run("discovery_responses", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "cds.yaml", "version_info: \"7\"\nresources:"+fmt.Sprintf(cluster, "a")+"type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster\nnonce: n\n")
		write(t, dir, "eds.json", `{"versionInfo": "7", "typeUrl": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
			"resources": [{"@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", "clusterName": "a"}]}`)
		write(t, dir, "lds.yaml", "version_info: \"7\"\ntype_url: type.googleapis.com/envoy.config.listener.v3.Listener\n")
		res, err := load(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Resources) != 2 || res.Files != 3 {
			t.Fatalf("got %d resources from %d files, want 2 from 3", len(res.Resources), res.Files)
		}
	})

	t.Run("bootstrap_static_resources", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "envoy.yaml", `static_resources:
  listeners:
  - name: l
    address: {socket_address: {address: 0.0.0.0, port_value: 10000}}
  clusters:
  - name: c
    type: STATIC
    load_assignment:
      cluster_name: c
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 8080}}}}]}]
  - "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
    name: d
  secrets:
  - name: s
`)
		write(t, dir, "more.json", `{"staticResources": {"clusters": [{"name": "e"}]}}`)
		res, err := load(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range res.Resources {
			got = append(got, r.Type.Short+" "+r.Name)
		}
		slices.Sort(got)
		if want := []string{"cds c", "cds d", "cds e", "lds l", "sds s"}; !slices.Equal(got, want) {
			t.Fatalf("resources %q, want %q", got, want)
		}
	})

	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"unknown_field", "a.yaml", "resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: a\n  colour: blue\n", `a.yaml: cds "a": unknown field "colour"`},
		{"unknown_field_nested", "a.yaml", "resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: a\n  load_assignment: {cluster_name: a, endpoints: [{}, {colour: blue}]}\n",
			`a.yaml: cds "a": load_assignment.endpoints[1]: unknown field "colour"`},
		{"wrapper_value_of_another_type", "e.yaml", "resources:\n- \"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\n  cluster_name: é\n  endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}, {load_balancing_weight: many}]}]\n",
			`e.yaml: eds "é": endpoints[0].lb_endpoints[1].load_balancing_weight: invalid value for uint32 field value: "many"`},
		{"failed_validate", "a.yaml", "resources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: a\n  connect_timeout: -1s\n", `a.yaml: cds "a": invalid Cluster.ConnectTimeout`},
		{"missing_type", "a.yaml", "resources:\n- name: a\n", `a.yaml: resource "a": missing "@type"`},
		{"not_a_resource_type", "a.yaml", "\"@type\": type.googleapis.com/google.protobuf.Struct\n", `is not an xDS resource type`},
		{"bad_yaml", "a.yaml", "resources: [", `a.yaml: invalid YAML`},
		{"bad_json", "a.json", "{", `a.json: invalid JSON`},
		{"route_to_missing_cluster", "r.yaml", "resources:\n- \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n  name: r\n  virtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: nope}}]}]\n",
			`r.yaml: rds "r": virtual_hosts[0].routes[0].route.cluster: route to cluster "nope", which does not exist`},
		{"type_url_of_another_type", "a.yaml", "type_url: type.googleapis.com/envoy.config.listener.v3.Listener\nresources:" + fmt.Sprintf(cluster, "a"),
			`a.yaml: cds "a": @type type.googleapis.com/envoy.config.cluster.v3.Cluster is not the document's type_url type.googleapis.com/envoy.config.listener.v3.Listener`},
		{"type_url_not_a_resource_type", "a.yaml", "type_url: type.googleapis.com/google.protobuf.Struct\nresources: []\n", `a.yaml: type_url "type.googleapis.com/google.protobuf.Struct" is not an xDS resource type`},
		{"response_field_unknown", "a.yaml", "canary: true\nresources:" + fmt.Sprintf(cluster, "a"), `may hold only "nodes" and a DiscoveryResponse's "version_info", "type_url" and "nonce" besides, not "canary"`},
		{"version_info_not_a_string", "a.json", `{"version_info": 1, "resources": []}`, `a.json: "version_info" must be a string`},
		{"resource_wrapper_of_another_name", "a.yaml", "\"@type\": type.googleapis.com/envoy.service.discovery.v3.Resource\nname: b\nresource: {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a}\n",
			`a.yaml: cds "a": name: "b" is not the resource's name "a"`},
		{"resources_null", "a.json", `{"resources": null}`, `a.json: "resources" must be a list`},
		{"type_url_twice", "a.yaml", "type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster\ntypeUrl: type.googleapis.com/envoy.config.cluster.v3.Cluster\nresources: []\n", `a.yaml: "typeUrl" and "type_url" are the same field`},
		{"resource_wrapper_name_not_a_string", "a.yaml", "\"@type\": type.googleapis.com/envoy.service.discovery.v3.Resource\nname: 5\nresource: {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a}\n",
			`a.yaml: cds "a": name: 5 is not a string`},
		{"resource_wrapper_field_unknown", "a.yaml", "\"@type\": type.googleapis.com/envoy.service.discovery.v3.Resource\ncache_control: {do_not_cache: true}\nresource: {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a}\n",
			`a.yaml: cds "a": unknown field "cache_control" in an envoy.service.discovery.v3.Resource (only name, version, ttl and resource)`},
		{"resource_wrapper_without_resource", "a.yaml", "\"@type\": type.googleapis.com/envoy.service.discovery.v3.Resource\nname: a\nttl: 30s\n",
			`a.yaml: resource "a": an envoy.service.discovery.v3.Resource without a resource`},
		{"json_after_the_value", "a.json", `{"resources": []} {"@type": "nonsense"}`, `a.json: invalid JSON: more after the first value`},
		{"bootstrap_fields", "envoy.yaml", "admin: {}\nstatic_resources: {clusters: [{name: a}]}\n", `a document with "static_resources" may hold only "nodes" besides, not "admin" (of a bootstrap, only static_resources is read)`},
		{"static_resources_unknown_list", "envoy.yaml", "static_resources: {routes: [{name: a}]}\n", `envoy.yaml: static_resources: unknown field "routes" (listeners, clusters and secrets are read)`},
		{"static_resources_typed_otherwise", "envoy.yaml", "static_resources: {clusters: [{\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener, name: a}]}\n",
			`static_resources.clusters[0]: @type type.googleapis.com/envoy.config.listener.v3.Listener is not type.googleapis.com/envoy.config.cluster.v3.Cluster`},
		{"eds_cluster_without_endpoints", "c.yaml", "resources:" + fmt.Sprintf(cluster, "lonely"), `c.yaml: cds "lonely": eds_cluster_config: EDS cluster has no endpoints resource`},
	} {
		t.Run("rejects_"+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, tc.file, tc.content)
			_, err := load(t, dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}

	// The same bytes give the same problem: a document's keys are looked
	// at in order.
	t.Run("rejects_in_the_same_words", func(t *testing.T) {
		for _, content := range []string{"resources: []\nfoo: 1\nbar: 2\nbaz: 3\n", "static_resources: {}\nadmin: {}\nnode: {}\nlayered_runtime: {}\n"} {
			var first string
			for range 20 {
				_, err := configdir.ParseFile("a.yaml", []byte(content))
				if err == nil {
					t.Fatalf("%q accepted", content)
				}
				if first == "" {
					first = err.Error()
				} else if err.Error() != first {
					t.Fatalf("%q: %q, then %q", content, first, err)
				}
			}
		}
	})

	t.Run("rejects_duplicate_across_files", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", clusterYAML("x", 1))
		write(t, dir, "b.yaml", "resources:"+fmt.Sprintf(cluster, "x"))
		ps := problems(t, func() error { _, err := load(t, dir); return err }())
		if len(ps) != 1 || ps[0].File != "b.yaml" || !strings.Contains(ps[0].Reason, "also defined in a.yaml") {
			t.Fatalf("problems %v", ps)
		}
	})

	t.Run("reload_reads_only_changed_files", func(t *testing.T) {
		dir := t.TempDir()
		for i := range 50 {
			write(t, dir, "eds/c"+strconv.Itoa(i)+".yaml", clusterYAML("c"+strconv.Itoa(i), i+1))
		}
		l := configdir.NewLoader(dir)
		res, err := l.Load()
		if err != nil || res.Reread != 50 {
			t.Fatalf("first load: %v, read %d", err, res.Reread)
		}
		write(t, dir, "eds/c7.yaml", clusterYAML("c7", 9999))
		res, err = l.Load()
		if err != nil || res.Reread != 1 || len(res.Resources) != 100 {
			t.Fatalf("reload: %v, read %d files, %d resources", err, res.Reread, len(res.Resources))
		}
		os.Remove(filepath.Join(dir, "eds/c8.yaml"))
		res, err = l.Load()
		if err != nil || res.Reread != 0 || len(res.Resources) != 98 {
			t.Fatalf("after removal: %v, read %d, %d resources", err, res.Reread, len(res.Resources))
		}
	})
}

// TestEnvoyResponseFilesLoad: a DiscoveryResponse as xdsd sends one, a
// resource with a TTL wrapped in Envoy's Resource with its version, saved
// in YAML or JSON, loads as the same resource.
func TestEnvoyResponseFilesLoad(t *testing.T) {
	want := resource.MustNew(&clusterv3.Cluster{Name: "a"}, resource.WithTTL(30*time.Second))
	body, err := anypb.New(want.Message)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := anypb.New(&discovery.Resource{Name: "a", Version: want.Version, Resource: body, Ttl: durationpb.New(want.TTL)})
	if err != nil {
		t.Fatal(err)
	}
	resp := &discovery.DiscoveryResponse{VersionInfo: "v", TypeUrl: resource.ClusterType, Resources: []*anypb.Any{wrapped}, Nonce: "n"}
	for _, enc := range []fileout.Encoding{fileout.YAML, fileout.JSON} {
		data, err := enc.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := configdir.ParseFile("cds"+enc.Ext(), data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", enc, err, data)
		}
		if len(got) != 1 || got[0].Version != want.Version || got[0].TTL != want.TTL {
			t.Fatalf("%s: %v, want %s at %s with a TTL of %v", enc, got, want.Name, want.Version, want.TTL)
		}
	}
}

func node(id, cluster string, md map[string]string) *corev3.Node {
	n := &corev3.Node{Id: id, Cluster: cluster}
	if md != nil {
		m := map[string]any{}
		for k, v := range md {
			m[k] = v
		}
		n.Metadata, _ = structpb.NewStruct(m)
	}
	return n
}

func names(res *configdir.Result, group string) []string {
	var out []string
	for _, r := range res.GroupResources(group) {
		if r.Type.Short == "cds" {
			out = append(out, r.Name)
		}
	}
	return out
}

func TestNodeGroups(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "common.yaml", clusterYAML("common", 1))
	write(t, dir, "by-id.yaml", "nodes: {ids: [n1, n2]}\n"+clusterYAML("for-ids", 2))
	write(t, dir, "by-cluster.yaml", "nodes: {clusters: [edge]}\n"+clusterYAML("for-edge", 3))
	write(t, dir, "by-metadata.yaml", "nodes: {metadata: {role: canary}}\n"+clusterYAML("for-canary", 4))
	res, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		node *corev3.Node
		want string
	}{
		{"N1_no_selector_match_sees_common_only", node("other", "mesh", nil), "common"},
		{"N1_selected_by_id", node("n2", "", nil), "common,for-ids"},
		{"N1_selected_by_cluster", node("x", "edge", nil), "common,for-edge"},
		{"N1_selected_by_metadata", node("x", "", map[string]string{"role": "canary"}), "common,for-canary"},
		{"N1_several_selectors", node("n1", "edge", map[string]string{"role": "canary"}), "common,for-edge,for-ids,for-canary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(names(res, res.GroupOf(tc.node)), ",")
			if got != tc.want {
				t.Fatalf("node %v sees %s, want %s", tc.node, got, tc.want)
			}
		})
	}
	t.Run("N1_default_every_node_sees_everything", func(t *testing.T) {
		d := t.TempDir()
		write(t, d, "a.yaml", clusterYAML("a", 1))
		r, err := load(t, d)
		if err != nil {
			t.Fatal(err)
		}
		if g := r.GroupOf(node("any", "thing", map[string]string{"k": "v"})); g != "" || len(r.GroupResources(g)) != 2 {
			t.Fatalf("group %q with %d resources", g, len(r.GroupResources(g)))
		}
	})
	t.Run("selector_criteria_all_apply", func(t *testing.T) {
		d := t.TempDir()
		write(t, d, "a.yaml", "nodes: {ids: [n1], clusters: [edge]}\n"+clusterYAML("both", 1))
		r, err := load(t, d)
		if err != nil {
			t.Fatal(err)
		}
		if g := r.GroupOf(node("n1", "mesh", nil)); g != "" {
			t.Fatalf("id matches but cluster does not: group %q", g)
		}
	})
	t.Run("rejects_bad_selectors", func(t *testing.T) {
		for _, sel := range []string{"nodes: {zone: [a]}", "nodes: {}", "nodes: {ids: n1}"} {
			d := t.TempDir()
			write(t, d, "a.yaml", sel+"\n"+clusterYAML("a", 1))
			if _, err := load(t, d); err == nil {
				t.Errorf("%s accepted", sel)
			}
		}
	})
}

// TestLoadJSONEmptyOrWithBOM: a JSON file that holds only white space
// holds nothing, as an empty YAML file does, and one may start with a
// byte order mark.
func TestLoadJSONEmptyOrWithBOM(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "empty.json", "")
	write(t, dir, "blank.json", " \n\t\n")
	write(t, dir, "bom.json", "\ufeff"+`{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "a", "type": "STATIC"}`)
	res, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resources) != 1 || res.Resources[0].Name != "a" {
		t.Fatalf("resources %v, want cluster a alone", res.Resources)
	}
}
