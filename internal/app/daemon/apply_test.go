package daemon

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
)

func cluster(name, statName string) *resource.Resource {
	return resource.MustNew(&clusterv3.Cluster{Name: name, AltStatName: statName})
}

// TestApply checks that a load is published whole or not at all
// (PROTOCOL N1: what a node sees is its group's, under one configuration).
func TestApply(t *testing.T) {
	t.Run("N1_a_group_that_does_not_build_rejects_the_whole_load", func(t *testing.T) {
		d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cache: cache.New(nil)}
		d.apply(&configdir.Result{Resources: []*resource.Resource{cluster("a", "v1")}})
		if !d.ready() {
			t.Fatal("not ready after a good load")
		}
		w := d.cache.Watch(&corev3.Node{Id: "edge-1"})
		defer w.Close()
		good := d.cache.Snapshot("")
		// The group of edge-1 would see cluster a twice: once for every
		// node, once for its selector. The loader refuses that; a
		// configuration made otherwise must be refused here.
		sel := &configdir.Selector{ID: "edge.yaml (document 1)", IDs: []string{"edge-1"}}
		d.apply(&configdir.Result{
			Resources: []*resource.Resource{cluster("a", "v2"), cluster("b", "v2")},
			Scoped:    []configdir.Scoped{{Selector: sel, Resources: []*resource.Resource{cluster("a", "edge")}}},
		})
		d.mu.Lock()
		err, failed := d.lastErr, d.reloads.failed
		d.mu.Unlock()
		if err == nil || failed != 1 ||
			!strings.Contains(err.Error(), "the nodes selected by edge.yaml (document 1)") ||
			!strings.Contains(err.Error(), `cds "a": duplicate resource name`) {
			t.Fatalf("load error %v (%d failed), want the group, the resource and the reason", err, failed)
		}
		if d.cache.Snapshot("") != good || d.cache.GroupOf(&corev3.Node{Id: "edge-1"}) != "" {
			t.Fatal("a rejected load published some of itself")
		}
	})
}
