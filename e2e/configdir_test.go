package e2e_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
)

// ---------------------------------------------------------------------------
// Comparing resources.

// sameResources checks that got (Anys, in any order) are the resources
// of want.
func sameResources(t *testing.T, what string, got []*anypb.Any, want []*resource.Resource) {
	t.Helper()
	gotByName := map[string]proto.Message{}
	var gotNames, wantNames []string
	for _, a := range got {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		r, err := resource.New(m)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		gotByName[r.Name] = m
		gotNames = append(gotNames, r.Name)
	}
	for _, r := range want {
		wantNames = append(wantNames, r.Name)
	}
	sort.Strings(gotNames)
	sort.Strings(wantNames)
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("%s: resources %q, want %q", what, gotNames, wantNames)
		return
	}
	for _, r := range want {
		if d := cmp.Diff(r.Message, gotByName[r.Name], protocmp.Transform()); d != "" {
			t.Errorf("%s: %s %q differs from the configuration (-want +got):\n%s", what, r.Type.Short, r.Name, d)
		}
	}
}

// sameResourcesByType is sameResources for every type of got and want.
func sameResourcesByType(t *testing.T, what string, got map[string][]*anypb.Any, want map[string][]*resource.Resource) {
	t.Helper()
	for url := range got {
		if _, ok := want[url]; !ok {
			t.Errorf("%s: has %s resources, want none", what, shortType(url))
		}
	}
	for url, rs := range want {
		sameResources(t, what+" "+shortType(url), got[url], rs)
	}
}

// ---------------------------------------------------------------------------
// The configuration directory.

// configDir is a configuration directory and what the test wrote in it.
type configDir struct {
	t     *testing.T
	dir   string
	files map[string]string // path relative to dir -> content
}

func newConfigDir(t *testing.T) *configDir {
	return &configDir{t: t, dir: t.TempDir(), files: map[string]string{}}
}

// write replaces the file rel with content as a careful writer does: it
// writes a temporary file whose name starts with "." (which xdsd ignores)
// and renames it into place, so xdsd never reads half a file.
func (c *configDir) write(rel, content string) {
	c.t.Helper()
	path := filepath.Join(c.dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.t.Fatal(err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		c.t.Fatal(err)
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		c.t.Fatal(err)
	}
	c.files[rel] = content
}

// remove removes the file rel.
func (c *configDir) remove(rel string) {
	c.t.Helper()
	if err := os.Remove(filepath.Join(c.dir, rel)); err != nil {
		c.t.Fatal(err)
	}
	delete(c.files, rel)
}

// resources parses what the test wrote, as xdsd does; it must be valid.
func (c *configDir) resources() []*resource.Resource {
	c.t.Helper()
	var out []*resource.Resource
	for rel, content := range c.files {
		rs, err := configdir.ParseFile(rel, []byte(content))
		if err != nil {
			c.t.Fatalf("the test's own configuration: %v", err)
		}
		out = append(out, rs...)
	}
	return out
}

// byType returns the resources by type URL.
func (c *configDir) byType() map[string][]*resource.Resource {
	out := map[string][]*resource.Resource{}
	for _, r := range c.resources() {
		out[r.Type.URL] = append(out[r.Type.URL], r)
	}
	return out
}

// versions returns, per type URL, the SotW version of all its resources
// (what a wildcard or all-names client holds).
func (c *configDir) versions() map[string]string {
	out := map[string]string{}
	for url, rs := range c.byType() {
		out[url] = setVersion(rs...)
	}
	return out
}

// writeService writes the listener, route, cluster and endpoints of the
// service, with endpoints addrs.
func (c *configDir) writeService(addrs ...string) {
	c.write("listener.yaml", listenerYAML(svcTarget, svcRoute))
	c.write("route.yaml", routeYAML(svcRoute, svcTarget, svcCluster))
	c.write("cluster.yaml", clusterYAML(svcCluster))
	c.write(endpointsFile, endpointsYAML(svcCluster, addrs...))
}

// listenerYAML is an API listener for grpc-go taking route from RDS over
// ADS.
func listenerYAML(name, route string) string {
	return fmt.Sprintf(`# The listener grpc-go resolves for xds:///%[1]s.
resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: %[1]s
  api_listener:
    api_listener:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: %[1]s
      rds:
        route_config_name: %[2]s
        config_source:
          ads: {}
          resource_api_version: V3
      http_filters:
      - name: envoy.filters.http.router
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
`, name, route)
}

// routeYAML sends everything for domain to cluster.
func routeYAML(name, domain, cluster string) string {
	return fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: %s
  virtual_hosts:
  - name: vh
    domains: [%q]
    routes:
    - match: {prefix: "/"}
      route: {cluster: %s}
`, name, domain, cluster)
}

// clusterYAML is an EDS cluster over ADS, as a one-item resources list.
func clusterYAML(name string) string {
	return fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %s
  type: EDS
  eds_cluster_config:
    eds_config:
      ads: {}
      resource_api_version: V3
  lb_policy: ROUND_ROBIN
`, name)
}

// endpointsYAML is a resources list holding one ClusterLoadAssignment
// (written in lowerCamelCase, which the loader takes too).
func endpointsYAML(cluster string, addrs ...string) string {
	return "resources:\n" + endpointsItemYAML(cluster, addrs...)
}

// endpointsItemYAML is one ClusterLoadAssignment as a resources list item.
func endpointsItemYAML(cluster string, addrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  clusterName: %s
  endpoints:
  - locality: {region: e2e}
    loadBalancingWeight: 1
    lbEndpoints:
`, cluster)
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, `    - endpoint:
        address:
          socketAddress: {address: %q, portValue: %s}
      healthStatus: HEALTHY
`, host, port)
	}
	return b.String()
}
