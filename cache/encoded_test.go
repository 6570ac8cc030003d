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
	if cache.NodeDecoded(w) {
		t.Fatal("the node is still held decoded with no grouping")
	}

	// A watcher that comes while a grouping is set is grouped at once.
	c.SetGrouping(func(n *corev3.Node) string { return n.GetCluster() }, build)
	<-woken
	w2 := c.WatchEncoded(raw, func() {})
	defer w2.Close()
	if snap, _, _ := w2.Take(); snap != edge || !cache.NodeDecoded(w2) {
		t.Fatalf("a watcher added under a grouping sees %v, decoded %v", snap, cache.NodeDecoded(w2))
	}
}

// TestWatchNilNode: Watch(nil) puts the watcher where GroupOf(nil) says.
func TestWatchNilNode(t *testing.T) {
	anon := cache.MustSnapshot(cluster("anon"))
	c := cache.New(func(n *corev3.Node) string {
		if n == nil {
			return "anon"
		}
		return "named"
	})
	c.SetSnapshot("anon", anon)
	w := c.Watch(nil)
	defer w.Close()
	if snap, _, _ := w.Take(); snap != anon || c.GroupOf(nil) != "anon" {
		t.Fatalf("Watch(nil) sees %v, GroupOf(nil) = %q; want both in group anon", snap, c.GroupOf(nil))
	}
}

// TestSnapshotMemoAndGetBytes: a memo is built once per snapshot and key;
// GetBytes finds what Get finds.
func TestSnapshotMemoAndGetBytes(t *testing.T) {
	r := cluster("a")
	snap := cache.MustSnapshot(r)
	key, builds := new(int), 0
	build := func() any { builds++; return builds }
	if v1, v2 := snap.Memo(key, build), snap.Memo(key, build); v1 != 1 || v2 != 1 || builds != 1 {
		t.Errorf("Memo: got %v then %v after %d builds, want 1 twice after 1", v1, v2, builds)
	}
	if got := snap.GetBytes(r.Type, []byte("a")); got != r {
		t.Errorf("GetBytes(a) = %v, want %v", got, r)
	}
	if got := snap.GetBytes(r.Type, []byte("b")); got != nil {
		t.Errorf("GetBytes(b) = %v, want nil", got)
	}
}
