package configdir_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/source/configdir"
)

// CheckReferences, for resources built in code, finds what the loader
// rejects a directory for across resources.
func TestCheckReferences(t *testing.T) {
	if err := configdir.CheckReferences(rawxds.Cluster("a"), rawxds.Endpoints("a", 1), rawxds.Route("r", "a")); err != nil {
		t.Fatalf("a whole configuration: %v", err)
	}
	err := configdir.CheckReferences(rawxds.Cluster("a"), rawxds.Route("r", "b"))
	var ce *configdir.Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("got %v, want two problems", err)
	}
	for _, want := range []string{`cds "a": eds_cluster_config`, `rds "r": virtual_hosts[0].routes[0].route.cluster: route to cluster "b"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), ": :") || strings.HasPrefix(ce.Problems[0].String(), ":") {
		t.Errorf("a problem without a file reads %q", ce.Problems[0])
	}
}
