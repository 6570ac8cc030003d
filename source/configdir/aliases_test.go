package configdir_test

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/source/configdir"
)

// vhostYAML is a VHDS virtual host with domains.
func vhostYAML(name string, domains ...string) string {
	return fmt.Sprintf(`
- "@type": type.googleapis.com/envoy.config.route.v3.VirtualHost
  name: %s
  domains: [%s]
  routes: [{match: {prefix: /}, direct_response: {status: 200}}]
`, name, strings.Join(domains, ", "))
}

// TestD7_aliases_name_one_resource: a virtual host's domains are names a
// client may subscribe by (VHDS aliases), so two virtual hosts of a node's
// view may not share one, nor may one list it twice: the loader rejects
// such a configuration with the file, the resource and the domain, where
// before it loaded and the snapshot could not be built. Virtual hosts of
// different route configurations, or under selectors that may match
// different nodes, may share domains.
func TestD7_aliases_name_one_resource(t *testing.T) {
	loaded := func(t *testing.T, dir string) *configdir.Result {
		t.Helper()
		res, err := load(t, dir)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		for _, id := range []string{"n1", "n2", "other"} {
			g := res.GroupOf(&corev3.Node{Id: id})
			if _, err := cache.NewSnapshot(res.GroupResources(g)...); err != nil {
				t.Fatalf("node %s's snapshot: %v", id, err)
			}
		}
		return res
	}
	rejected := func(t *testing.T, dir, file, resource string, reason ...string) {
		t.Helper()
		_, err := load(t, dir)
		if err == nil {
			t.Fatal("loaded")
		}
		ps := problems(t, err)
		if len(ps) != 1 || ps[0].File != file || ps[0].Resource != resource {
			t.Fatalf("problems %v; want one of %s, %s", ps, file, resource)
		}
		for _, r := range reason {
			if !strings.Contains(ps[0].Reason, r) {
				t.Errorf("reason %q; want it to say %q", ps[0].Reason, r)
			}
		}
	}

	t.Run("two_virtual_hosts_share_a_domain", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", "resources:"+vhostYAML("rc/one", "a.example", "shared.example"))
		write(t, dir, "b.yaml", "resources:"+vhostYAML("rc/two", "shared.example"))
		rejected(t, dir, "b.yaml", `vhds "rc/two"`, `domain "shared.example"`, `vhds "rc/one" in a.yaml (resource #1)`)
	})
	t.Run("a_domain_listed_twice", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", "resources:"+vhostYAML("rc/one", "a.example", "a.example"))
		rejected(t, dir, "a.yaml", `vhds "rc/one"`, `domain "a.example" is listed twice`)
	})
	t.Run("route_configurations_apart", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", "resources:"+vhostYAML("rc1/one", "a.example")+vhostYAML("rc2/one", "a.example"))
		loaded(t, dir)
	})
	t.Run("a_selector_with_the_common_ones", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "z.yaml", "resources:"+vhostYAML("rc/one", "a.example")) // sorts after the selector's file
		write(t, dir, "sel-a.yaml", "nodes: {ids: [n1]}\nresources:"+vhostYAML("rc/two", "a.example"))
		rejected(t, dir, "sel-a.yaml", `vhds "rc/two"`, `domain "a.example"`, "z.yaml")
	})
	t.Run("selectors_apart", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "sel-a.yaml", "nodes: {ids: [n1]}\nresources:"+vhostYAML("rc/two", "a.example"))
		write(t, dir, "sel-b.yaml", "nodes: {ids: [n2]}\nresources:"+vhostYAML("rc/three", "a.example"))
		loaded(t, dir)
	})
	t.Run("a_reload_that_changes_domains", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", "resources:"+vhostYAML("rc/one", "a.example"))
		write(t, dir, "b.yaml", "resources:"+vhostYAML("rc/two", "b.example"))
		l := configdir.NewLoader(dir)
		if _, err := l.Load(); err != nil {
			t.Fatal(err)
		}
		// The same names, new contents: the reload that only swaps
		// resources must check the domains too.
		write(t, dir, "b.yaml", "resources:"+vhostYAML("rc/two", "a.example"))
		if _, err := l.Reload([]string{"b.yaml"}); err == nil {
			t.Fatal("a reload that gives two virtual hosts one domain succeeded")
		} else if ps := problems(t, err); len(ps) != 1 || ps[0].File != "b.yaml" {
			t.Fatalf("problems %v", ps)
		}
		write(t, dir, "b.yaml", "resources:"+vhostYAML("rc/two", "c.example"))
		res, err := l.Reload([]string{"b.yaml"})
		if err != nil {
			t.Fatalf("a reload that fixes it: %v", err)
		}
		if _, err := cache.NewSnapshot(res.GroupResources("")...); err != nil {
			t.Fatal(err)
		}
	})
}
