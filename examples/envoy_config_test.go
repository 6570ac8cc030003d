package examples_test

import (
	"testing"

	"github.com/xdsd/xdsd/source/configdir"
)

// The Envoy example configuration loads: listener → route → cluster →
// endpoints, every reference resolved.
func TestEnvoyConfigLoads(t *testing.T) {
	res, err := configdir.NewLoader("envoy-config").Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resources) != 4 || res.Files != 4 {
		t.Fatalf("loaded %d resources from %d files, want 4 and 4", len(res.Resources), res.Files)
	}
}
