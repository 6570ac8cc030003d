package server

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
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
		want := r
		if c.flags&fHas == 0 {
			want = nil // names only (adoptNamed)
		}
		if e := c.keys[i]; e.key != r.Name || e.res != want || e.flags != c.flags {
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
		ts := newTypeState(cdsType, true)
		ts.active = true
		ts.subscribe([]string{"a", "b", "c"}, nil, true)
		w := ts.evaluate(snap1)
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
	w := x.evaluate(snap2)
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
	if w = x.evaluate(snap3); len(w.upserts) != 1 {
		t.Fatalf("work %+v, want one upsert (c)", w)
	}
	x.settle(w, true, snap3)
	if x.shared == nil || x.shared == c2 {
		t.Fatal("a resource rebuilt at the same version stops x sharing")
	}

	// y unsubscribes from c: it copies its list.
	y.subscribe(nil, []string{"c"}, false)
	w = y.evaluate(snap1)
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

// A new stream's first subscription that names every endpoint set, once
// each, in any order, shares one list of the names with every such stream
// until its first response, and ends where a stream that built its own
// list does. Anything else builds its own.
func TestFirstSubscriptionSharesNames(t *testing.T) {
	cla := func(name string, port uint32) *resource.Resource {
		return resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}}}}}})
	}
	a, b, c := cla("a", 1), cla("b", 1), cla("c", 1)
	snap := cache.MustSnapshot(a, b, c)
	snap2 := cache.MustSnapshot(a, cla("b", 2))                        // b changed, c gone
	snap3 := cache.MustSnapshot(cla("a", 3), cla("b", 3), cla("c", 3)) // every one changed
	names := []string{"a", "b", "c"}
	keys := func(w work) []string {
		var out []string
		for _, it := range w.upserts {
			v := "-"
			if it.res != nil {
				v = it.res.Version
			}
			out = append(out, it.key+"@"+v)
		}
		slices.Sort(out)
		return append(out, w.removals...)
	}
	for _, delta := range []bool{true, false} {
		flags := fNamed
		if !delta {
			flags |= fResend // SotW sends what a new subscription names (S10)
		}
		own := func() *typeState { // the way a list of its own is built
			ts := newTypeState(edsType, delta)
			if delta {
				ts.subscribe(names, nil, true)
			} else {
				ts.setNames(names)
			}
			return ts
		}
		adopted := func(names ...string) *typeState {
			ts := newTypeState(edsType, delta)
			if !ts.adoptNames(snap, names, flags) {
				t.Fatalf("delta %v: the snapshot's names %v were not adopted", delta, names)
			}
			return ts
		}
		for _, later := range []*cache.Snapshot{snap, snap2, snap3} {
			x, y, ref := adopted(names...), adopted("c", "a", "b"), own()
			named := x.shared
			if named == nil || y.shared != named || named.flags != flags || x.nResend != ref.nResend || x.everNamed != ref.everNamed || !x.reeval {
				t.Fatalf("delta %v: adopted lists %p %p (flags %b), nResend %d, want one shared list with flags %b, nResend %d",
					delta, x.shared, y.shared, named.flags, x.nResend, flags, ref.nResend)
			}
			wx, wref := x.evaluate(later), ref.evaluate(later)
			if later != snap2 && (len(wx.upserts) == 0 || &wx.upserts[0] != &allItems(later, edsType)[0]) {
				t.Fatalf("delta %v: the first response's items are not the snapshot's shared list", delta)
			}
			if got, want := keys(wx), keys(wref); !slices.Equal(got, want) {
				t.Fatalf("delta %v: work %v, want %v", delta, got, want)
			}
			x.settle(wx, true, later)
			ref.settle(wref, true, later)
			if x.version() != ref.version() || x.nHeld != ref.nHeld || x.nResend != 0 || (x.shared == nil) != (ref.shared == nil) || x.shared != ref.shared {
				t.Fatalf("delta %v: after the first response: version %s, held %d, shared %p; want %s, %d, %p",
					delta, x.version(), x.nHeld, x.shared, ref.version(), ref.nHeld, ref.shared)
			}
			if !named.intact() {
				t.Fatalf("delta %v: the shared names were written into", delta)
			}
		}

		// A change of subscription before the first response copies the list.
		x := adopted(names...)
		named := x.shared
		x.subscribe(nil, []string{"b"}, false)
		if x.shared != nil || !named.intact() {
			t.Fatalf("delta %v: unsubscribing did not copy the shared names", delta)
		}
		if got := keys(x.evaluate(snap)); !slices.Equal(got, []string{"a@" + a.Version, "c@" + c.Version}) {
			t.Fatalf("delta %v: after unsubscribing b, work %v", delta, got)
		}
	}
	for _, n := range [][]string{{"a", "b"}, {"a", "b", "c", "d"}, {"*", "a", "b"}, {"a", "a", "c"}, {"c", "b", "c"}, {"a", "b", "d"}} {
		ts := newTypeState(edsType, true)
		if ts.adoptNames(snap, n, fNamed) || ts.shared != nil || len(ts.keys) != 0 || ts.everNamed {
			t.Fatalf("names %v were adopted as the snapshot's", n)
		}
	}
	// A resource named "*": a subscription naming it asks for the wildcard.
	if newTypeState(edsType, true).adoptNames(cache.MustSnapshot(cla("*", 1), a, b), []string{"*", "a", "b"}, fNamed) {
		t.Fatal(`"*" was adopted as a name`)
	}
	ts := newTypeState(edsType, true)
	ts.subscribe([]string{"a"}, nil, true)
	if ts.adoptNames(snap, names, fNamed) {
		t.Fatal("names were adopted by a list that had some")
	}
	if newTypeState(edsType, true).adoptNames(nil, names, fNamed) {
		t.Fatal("names were adopted without a snapshot")
	}
}

// A per-type EDS stream (not ADS) shares the snapshot's names too: its
// first request is also what starts its watch, which must hand it the
// snapshot before the request is applied.
func TestFirstSubscriptionSharesNamesPerType(t *testing.T) {
	c := cache.New(nil)
	cla := func(name string) *resource.Resource {
		return resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: name})
	}
	c.SetSnapshot("", cache.MustSnapshot(cla("a"), cla("b")))
	for _, delta := range []bool{true, false} {
		st := New(c, Config{}).newStream(delta, edsType)
		st.waker.fn = func() {}
		var err error
		if delta {
			err = st.handleDelta(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "n"}, ResourceNamesSubscribe: []string{"b", "a"}})
		} else {
			err = st.handleSotw(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "n"}, ResourceNames: []string{"b", "a"}})
		}
		if err != nil {
			t.Fatal(err)
		}
		if ts := st.types.get(edsType); ts == nil || ts.shared == nil || ts.shared.flags&fHas != 0 {
			t.Fatalf("delta %v: the first request's names are not the snapshot's shared names", delta)
		}
		st.close()
	}
}

// TestNoTurnAfterClose: a turn that comes after its stream closed (a
// wake-up racing the end) runs nothing, so that nothing is sent, or
// counted as awaiting a reply, for a stream that is gone.
func TestNoTurnAfterClose(t *testing.T) {
	st := New(cache.New(nil), Config{}).newStream(true, edsType)
	st.waker.fn = func() {}
	st.close()
	ran := false
	if err := st.turn(func() error { ran = true; return nil }); err != nil || ran {
		t.Fatalf("a turn after close ran its handler (%v) or failed: %v", ran, err)
	}
}
