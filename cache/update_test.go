package cache_test

import (
	"fmt"
	"sync"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// Changes made from several goroutines with Update are none of them lost,
// as they are with a read of Snapshot and a SetSnapshot each.
func TestUpdateFromManyGoroutinesLosesNothing(t *testing.T) {
	c := cache.New(nil)
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := cluster(fmt.Sprintf("c-%d-%d", w, i))
				if _, err := c.Update("", func(cur *cache.Snapshot) (*cache.Snapshot, error) { return cur.With(r) }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cds := resource.Lookup(resource.ClusterType)
	if n := c.Snapshot("").Len(cds); n != writers*each {
		t.Fatalf("%d clusters after %d updates, want all", n, writers*each)
	}
	if _, err := c.Update("", func(*cache.Snapshot) (*cache.Snapshot, error) { return nil, fmt.Errorf("no") }); err == nil {
		t.Fatal("an error of the function is not returned")
	}
	if n := c.Snapshot("").Len(cds); n != writers*each {
		t.Fatalf("a failed update published: %d clusters", n)
	}
}

func TestSnapshotWithWithout(t *testing.T) {
	cds := resource.Lookup(resource.ClusterType)
	var nilSnap *cache.Snapshot
	s, err := nilSnap.With(cluster("a"), cluster("b"))
	if err != nil || s.Len(cds) != 2 {
		t.Fatalf("With on nil: %v, %d clusters", err, s.Len(cds))
	}
	b2 := resource.MustNew(&clusterv3.Cluster{Name: "b", AltStatName: "x"})
	s2, err := s.With(b2, cluster("c"))
	if err != nil || s2.Len(cds) != 3 || s2.Get(cds, "b") != b2 || s2.Get(cds, "a") != s.Get(cds, "a") {
		t.Fatalf("With: %v, %v", err, s2.All())
	}
	if twice, err := s.With(cluster("d"), cluster("d")); err != nil || twice.Len(cds) != 3 {
		t.Fatalf("With of a new resource named twice: %v", err)
	}
	if s.Len(cds) != 2 || s.Get(cds, "b") == b2 {
		t.Fatal("With changed its receiver")
	}
	s3 := s2.Without(cds, "a", "nope")
	if s3.Len(cds) != 2 || s3.Get(cds, "a") != nil || s2.Get(cds, "a") == nil {
		t.Fatalf("Without: %v", s3.All())
	}
	if len(nilSnap.All()) != 0 || nilSnap.Without(cds, "a").Len(cds) != 0 {
		t.Fatal("a nil snapshot has resources")
	}
}

// Snapshots published for groups no node uses yet are kept when the
// grouping is set without a builder, which could not make them again.
func TestSetGroupingKeepsPublishedSnapshots(t *testing.T) {
	c := cache.New(nil)
	c.SetSnapshot("edge", cache.MustSnapshot(cluster("a")))
	byCluster := func(n *corev3.Node) string { return n.GetCluster() }
	c.SetGrouping(byCluster, nil)
	if c.Snapshot("edge") == nil {
		t.Fatal("SetGrouping without a builder dropped a published snapshot")
	}
	w := c.Watch(&corev3.Node{Id: "n", Cluster: "edge"})
	w.Close()
	if c.Snapshot("edge") == nil {
		t.Fatal("the last watcher's leaving dropped a published snapshot")
	}
	// With a builder, a group no node uses is forgotten and built again.
	c.SetGrouping(byCluster, func(g string) *cache.Snapshot { return cache.MustSnapshot(cluster("built-" + g)) })
	cds := resource.Lookup(resource.ClusterType)
	if s := c.Snapshot("edge"); s == nil || s.Get(cds, "built-edge") == nil {
		t.Fatalf("with a builder, group edge is %v, want the builder's", s.All())
	}
}

func TestNewSnapshotRefusesResourcesNotMadeByNew(t *testing.T) {
	cds := resource.Lookup(resource.ClusterType)
	for _, r := range []*resource.Resource{nil, {Type: cds, Name: "hand"}} {
		if _, err := cache.NewSnapshot(cluster("a"), r); err == nil {
			t.Errorf("NewSnapshot took %v", r)
		}
	}
	if _, err := resource.New(nil); err == nil {
		t.Error("resource.New(nil) gave no error")
	}
}
