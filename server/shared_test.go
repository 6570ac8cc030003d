package server

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// Tests share every list they can, however short.
func init() { minShared = 1 }

// intact reports whether nobody wrote into the canonical list.
func (c *canonical) intact() bool {
	if len(c.keys) != len(c.rs) {
		return false
	}
	for i, r := range c.rs {
		if e := c.keys[i]; e.key != r.Name || e.res != r || e.flags != c.flags {
			return false
		}
	}
	return true
}

// checkShared checks that every shared list the stream has used is intact
// and that a type that says it shares a list does.
func (fc *fuzzClient) checkShared() {
	fc.t.Helper()
	if fc.canonicals == nil {
		fc.canonicals = make(map[*canonical]bool)
	}
	for _, ts := range fc.st.types.list {
		if c := ts.shared; c != nil {
			fc.canonicals[c] = true
			if len(ts.keys) != len(c.keys) || (len(c.keys) > 0 && &ts.keys[0] != &c.keys[0]) {
				fc.t.Fatalf("%s: the list marked shared is not the canonical list: %d keys, canonical %d", ts.t.Short, len(ts.keys), len(c.keys))
			}
		}
	}
	for c := range fc.canonicals {
		if !c.intact() {
			fc.t.Fatal("a stream wrote into a shared canonical list")
		}
	}
}

// Two streams holding every cluster share one list; changing one's
// subscription, or sending it a change the other has not had, copies its
// list first and leaves the other's as it was.
func TestSharedKeyLists(t *testing.T) {
	cluster := func(name string, timeout int64) *resource.Resource {
		return resource.MustNew(&clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Duration(timeout) * time.Second)})
	}
	rs := []*resource.Resource{cluster("a", 1), cluster("b", 1), cluster("c", 1)}
	snap1 := cache.MustSnapshot(rs...)
	newState := func() *typeState {
		ts := newTypeState(cdsType)
		ts.active = true
		ts.subscribe([]string{"a", "b", "c"}, nil, true)
		w := ts.evaluate(snap1, true)
		ts.settle(w, true, snap1)
		return ts
	}
	x, y := newState(), newState()
	if x.shared == nil || x.shared != y.shared {
		t.Fatalf("streams holding every cluster do not share their list: %p %p", x.shared, y.shared)
	}
	c1 := x.shared

	// x is sent a change: it moves to the next snapshot's list.
	b2 := cluster("b", 2)
	snap2 := cache.MustSnapshot(rs[0], b2, rs[2])
	x.markDirty([]string{"b"})
	w := x.evaluate(snap2, true)
	if len(w.upserts) != 1 || w.upserts[0].res != b2 {
		t.Fatalf("work %+v, want an upsert of the new b", w)
	}
	x.settle(w, true, snap2)
	if x.shared == nil || x.shared == c1 {
		t.Fatal("after the change x does not share the new snapshot's list")
	}

	// A source rebuilds a unchanged while c changes: x still moves on.
	c2 := x.shared
	snap3 := cache.MustSnapshot(cluster("a", 1), b2, cluster("c", 3))
	x.markDirty([]string{"c"})
	if w = x.evaluate(snap3, true); len(w.upserts) != 1 {
		t.Fatalf("work %+v, want one upsert (c)", w)
	}
	x.settle(w, true, snap3)
	if x.shared == nil || x.shared == c2 {
		t.Fatal("a resource rebuilt at the same version stops x sharing")
	}

	// y unsubscribes from c: it copies its list.
	y.subscribe(nil, []string{"c"}, false)
	w = y.evaluate(snap1, true)
	y.settle(w, true, snap1)
	if y.shared != nil {
		t.Fatal("y still shares a list after unsubscribing")
	}
	if got := slices.Collect(func(yield func(string) bool) {
		for k := range y.held() {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("y holds %v, want [a b]", got)
	}
	for _, c := range []*canonical{c1, c2, x.shared} {
		if !c.intact() {
			t.Fatal("a canonical list was written into")
		}
	}
}
