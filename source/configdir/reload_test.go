package configdir_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/source/configdir"
)

// versions lists a result's resources as type, name and version, in order.
func versions(res *configdir.Result) []string {
	var out []string
	for _, r := range res.Resources {
		out = append(out, r.Type.Short+"/"+r.Name+"@"+r.Version)
	}
	return out
}

// TestReloadMatchesLoad reloads after changes of every kind (contents
// only, a broken and a mended reference, a resource renamed, a file added)
// and checks each result against a fresh Load of the same directory.
func TestReloadMatchesLoad(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		write(t, dir, fmt.Sprintf("eds/c%d.yaml", i), clusterYAML(fmt.Sprintf("c%d", i), 1000+i))
	}
	l := configdir.NewLoader(dir)
	if _, err := l.Load(); err != nil {
		t.Fatal(err)
	}
	check := func(step string, paths ...string) {
		t.Helper()
		got, err := l.Reload(paths)
		want, werr := load(t, dir)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%s: Reload error %v, Load error %v", step, err, werr)
		}
		if err != nil {
			if err.Error() != werr.Error() {
				t.Fatalf("%s: Reload error\n%v\nLoad error\n%v", step, err, werr)
			}
			return
		}
		if !slices.Equal(versions(got), versions(want)) || got.Files != want.Files {
			t.Fatalf("%s: Reload gave %v (%d files), Load %v (%d files)", step, versions(got), got.Files, versions(want), want.Files)
		}
	}
	write(t, dir, "eds/c3.yaml", clusterYAML("c3", 2003))
	check("contents changed", "eds/c3.yaml")
	write(t, dir, "eds/c1.yaml", clusterYAML("c1", 2001))
	write(t, dir, "eds/c4.yaml", clusterYAML("c4", 2004))
	check("two files' contents changed", "eds/c1.yaml", "eds/c4.yaml")

	// The cluster now asks for endpoints that do not exist: rejected, as
	// Load rejects it, naming the file.
	broken := "resources:" + strings.Replace(fmt.Sprintf(cluster, "c2"), "eds_config: {ads: {}}", "eds_config: {ads: {}}, service_name: nowhere", 1) +
		fmt.Sprintf(endpoints, "c2", 1002)
	write(t, dir, "eds/c2.yaml", broken)
	_, err := l.Reload([]string{"eds/c2.yaml"})
	if ps := problems(t, err); len(ps) != 1 || ps[0].File != "eds/c2.yaml" || !strings.Contains(ps[0].Reason, `"nowhere"`) {
		t.Fatalf("problems %+v, want one in eds/c2.yaml about \"nowhere\"", ps)
	}
	write(t, dir, "eds/c2.yaml", clusterYAML("c2", 3002))
	check("reference mended", "eds/c2.yaml")

	// Renamed: not the same resources any more.
	write(t, dir, "eds/c0.yaml", clusterYAML("renamed", 1000))
	check("resource renamed", "eds/c0.yaml")
	write(t, dir, "eds/c9.yaml", clusterYAML("c9", 1009))
	check("file added", "eds/c9.yaml")
	write(t, dir, "eds/c9.yaml", clusterYAML("c9", 2009))
	check("contents changed after a full assembly", "eds/c9.yaml")
	// A duplicate of another file's resource, then gone again.
	write(t, dir, "eds/c9.yaml", clusterYAML("c1", 2009))
	check("duplicate", "eds/c9.yaml")
	write(t, dir, "eds/c9.yaml", clusterYAML("c9", 4009))
	check("duplicate gone", "eds/c9.yaml")
	if got, err := l.Reload(nil); err != nil || len(got.Resources) != 12 {
		t.Fatalf("reload of nothing: %v, %d resources", err, len(got.Resources))
	}
}
