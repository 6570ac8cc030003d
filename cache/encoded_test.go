package cache_test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/cache"
)

// TestWatchEncoded: a watcher of an encoded node is grouped by the node
// its encoding decodes to once a grouping asks, and moves with the
// grouping; while there is no grouping, its node is never decoded.
func TestWatchEncoded(t *testing.T) {
	all, edge := cache.MustSnapshot(cluster("a")), cache.MustSnapshot(cluster("e"))
	build := func(group string) *cache.Snapshot { // as the daemon's: groups are built when first needed
		if group == "edge" {
			return edge
		}
		return all
	}
	c := cache.New(nil)
	c.SetGrouping(nil, build)
	raw, err := proto.Marshal(&corev3.Node{Id: "n1", Cluster: "edge"})
	if err != nil {
		t.Fatal(err)
	}
	woken := make(chan struct{}, 4)
	w := c.WatchEncoded(raw, func() { woken <- struct{}{} })
	defer w.Close()
	sees := func(want *cache.Snapshot, what string) {
		t.Helper()
		if snap, _, _ := w.Take(); snap != want {
			t.Fatalf("%s: the watcher sees %v, want %v", what, snap, want)
		}
	}
	sees(all, "no grouping")
	c.SetGrouping(nil, build)
	if cache.NodeDecoded(w) {
		t.Fatal("the node was decoded with no grouping")
	}

	c.SetGrouping(func(n *corev3.Node) string { return n.GetCluster() }, build)
	select {
	case <-woken:
	default:
		t.Fatal("not woken when the grouping moved it")
	}
	sees(edge, "grouped by cluster")
	if !cache.NodeDecoded(w) {
		t.Fatal("grouped without its node decoded")
	}

	c.SetGrouping(nil, build)
	select {
	case <-woken:
	default:
		t.Fatal("not woken when the grouping moved it back")
	}
	sees(all, "no grouping again")
}
