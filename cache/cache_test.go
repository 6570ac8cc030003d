package cache_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func cluster(name string) *resource.Resource {
	return resource.MustNew(&clusterv3.Cluster{Name: name})
}

func kicked(w *cache.Watcher) bool {
	select {
	case <-w.Kick():
		return true
	default:
		return false
	}
}

func TestPublishReachesWatchersOfAGroupWithoutSnapshot(t *testing.T) {
	c := cache.New(nil)
	c.SetGrouping(nil, func(string) *cache.Snapshot { return nil }) // nothing loaded yet
	w := c.Watch(&corev3.Node{Id: "early"})
	defer w.Close()
	if kicked(w) {
		t.Fatal("kicked before any snapshot")
	}
	c.SetGrouping(nil, func(string) *cache.Snapshot { return cache.MustSnapshot(cluster("a")) })
	if ch := c.SetSnapshot("", cache.MustSnapshot(cluster("a"))); len(ch) == 0 {
		t.Fatal("the first snapshot of a group reports no change")
	}
	if !kicked(w) {
		t.Fatal("watcher not woken by the first snapshot")
	}
	snap, pending, _ := w.Take()
	cds := resource.Lookup(resource.ClusterType)
	if snap.Get(cds, "a") == nil || len(pending.Changes) != 1 || !slices.Contains(pending.Changes[0][cds], "a") {
		t.Fatalf("watcher sees %v, pending %v", snap, pending)
	}
}

func TestDiff(t *testing.T) {
	cds := resource.Lookup(resource.ClusterType)
	old := cache.MustSnapshot(cluster("same"), cluster("changed"), cluster("gone"))
	changed := resource.MustNew(&clusterv3.Cluster{Name: "changed", AltStatName: "x"})
	next := cache.MustSnapshot(cluster("same"), changed, cluster("new"))
	got := map[string]bool{}
	for _, k := range next.Diff(old)[cds] {
		got[k] = true
	}
	if len(got) != 3 || !got["changed"] || !got["gone"] || !got["new"] {
		t.Fatalf("diff %v, want changed, gone and new", got)
	}
	if _, err := cache.NewSnapshot(cluster("a"), cluster("a")); err == nil {
		t.Fatal("duplicate names accepted")
	}
}

func TestVersionIsContentHash(t *testing.T) {
	a, b := cluster("a"), cluster("a")
	if a.Version != b.Version || a.Hash() != b.Hash() {
		t.Fatal("equal content, different versions")
	}
	if cluster("b").Version == a.Version {
		t.Fatal("different content, equal versions")
	}
}

func TestOnDemandBuildWakesWaitingWatchers(t *testing.T) {
	c := cache.New(nil)
	c.SetGrouping(nil, func(string) *cache.Snapshot { return nil })
	early := c.Watch(&corev3.Node{Id: "early"})
	defer early.Close()
	// A builder appears; another node's arrival builds the group's snapshot
	// before any publication does.
	c.SetGrouping(nil, func(string) *cache.Snapshot { return cache.MustSnapshot(cluster("a")) })
	late := c.Watch(&corev3.Node{Id: "late"})
	defer late.Close()
	if !kicked(early) {
		t.Fatal("a watcher waiting for a first snapshot was not woken by its on-demand build")
	}
	if snap, _, _ := early.Take(); snap == nil {
		t.Fatal("no snapshot after the wake-up")
	}
}

func TestWatcherBoundsPendingPublications(t *testing.T) {
	c := cache.New(nil)
	w := c.Watch(&corev3.Node{})
	defer w.Close()
	for i := range 40 {
		c.SetSnapshot("", cache.MustSnapshot(cluster(fmt.Sprint("c", i))))
	}
	if _, pending, _ := w.Take(); !pending.All || pending.Changes != nil {
		t.Fatalf("a watcher that does not look kept %d change sets", len(pending.Changes))
	}
}

// TestDiffMatchesLookups compares Diff, which walks both snapshots in name
// order, with the rule spelled out by lookups, on random pairs of snapshots
// of virtual hosts (which have aliases) that share some resources, change
// some, and add and drop others.
func TestDiffMatchesLookups(t *testing.T) {
	vhds := resource.Lookup(resource.VirtualHostType)
	vhost := func(i, gen int) *resource.Resource {
		return resource.MustNew(&routev3.VirtualHost{Name: fmt.Sprintf("rc/vh%02d", i),
			Domains: []string{fmt.Sprintf("d%d-%d.example", i, gen)}})
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var before, after []*resource.Resource
		for i := range 30 {
			r := vhost(i, 0)
			switch rnd.IntN(5) {
			case 0: // only before
				before = append(before, r)
			case 1: // only after
				after = append(after, r)
			case 2: // in both, shared
				before, after = append(before, r), append(after, r)
			case 3: // in both, equal content but not shared
				before, after = append(before, r), append(after, vhost(i, 0))
			default: // changed: another domain, so other aliases
				before, after = append(before, r), append(after, vhost(i, 1+rnd.IntN(6)))
			}
		}
		old, next := cache.MustSnapshot(before...), cache.MustSnapshot(after...)
		want := map[string]bool{}
		for _, r := range after {
			if o := old.Get(vhds, r.Name); o == nil || o.Version != r.Version {
				want[r.Name] = true
				for _, a := range r.Aliases {
					want[a] = true
				}
				if o != nil {
					for _, a := range o.Aliases {
						want[a] = true
					}
				}
			}
		}
		for _, o := range before {
			if next.Get(vhds, o.Name) == nil {
				want[o.Name] = true
				for _, a := range o.Aliases {
					want[a] = true
				}
			}
		}
		got := next.Diff(old)[vhds]
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) || len(got) != len(want) {
			t.Fatalf("diff %v, want the keys %v, sorted, once each", got, want)
		}
		for _, k := range got {
			if !want[k] {
				t.Fatalf("diff %v, want the keys %v", got, want)
			}
		}
	}
}

// TestSnapshotFromPrevious checks that a snapshot built from a previous one
// holds exactly what one built from scratch does, on random pairs: the
// previous resources kept, replaced by new versions, dropped, added; virtual
// hosts gaining and losing aliases; types given in one run each, in several
// runs, or out of order; duplicates. Neither the previous snapshot nor the
// caller's list may change, and Diff must agree both ways.
func TestSnapshotFromPrevious(t *testing.T) {
	clusterGen := func(i, gen int) *resource.Resource {
		return resource.MustNew(&clusterv3.Cluster{Name: fmt.Sprintf("c%02d", i), AltStatName: fmt.Sprint(gen)})
	}
	vhost := func(i, gen int) *resource.Resource {
		domains := []string{fmt.Sprintf("vh%02d", i)} // an alias equal to the name: none
		if gen%2 == 1 {
			domains = append(domains, fmt.Sprintf("d%d-%d.example", i, gen))
		}
		return resource.MustNew(&routev3.VirtualHost{Name: fmt.Sprintf("rc/vh%02d", i), Domains: domains,
			IncludeRequestAttemptCount: gen >= 2})
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for round := range 400 {
		var before, after []*resource.Resource
		sameNames := rnd.IntN(2) == 0 // then clusters are only kept or replaced
		for i := range 20 {
			c := clusterGen(i, 0)
			pick := rnd.IntN(6)
			if sameNames {
				pick = 2 + rnd.IntN(4)
			}
			switch pick {
			case 0:
				before = append(before, c)
			case 1:
				after = append(after, c)
			case 2, 3:
				before, after = append(before, c), append(after, c)
			default:
				before, after = append(before, c), append(after, clusterGen(i, 1+rnd.IntN(3)))
			}
		}
		for i := range 6 {
			v := vhost(i, rnd.IntN(4))
			before = append(before, v)
			switch rnd.IntN(3) {
			case 0:
				after = append(after, v)
			case 1:
				after = append(after, vhost(i, rnd.IntN(4)))
			}
		}
		switch rnd.IntN(5) {
		case 0: // types in several runs
			rnd.Shuffle(len(after), func(i, j int) { after[i], after[j] = after[j], after[i] })
		case 1: // one run per type, out of order
			if len(after) > 2 {
				after[0], after[1] = after[1], after[0]
			}
		case 2: // a duplicate: both must refuse it
			if len(after) > 0 {
				after = append(after, after[rnd.IntN(len(after))])
			}
		}
		var keys []string
		for _, r := range append(slices.Clone(before), after...) {
			keys = append(append(keys, r.Name), r.Aliases...)
		}
		prev := cache.MustSnapshot(before...)
		prevView := snapshotView(prev, keys)
		arg := slices.Clone(after)
		got, err := cache.NewSnapshotFrom(prev, arg...)
		if !slices.Equal(arg, after) {
			t.Fatalf("round %d: the caller's list was changed", round)
		}
		if !reflect.DeepEqual(snapshotView(prev, keys), prevView) {
			t.Fatalf("round %d: the previous snapshot was changed", round)
		}
		want, wantErr := cache.NewSnapshot(slices.Clone(after)...)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("round %d: error %v from the previous snapshot, %v from scratch", round, err, wantErr)
		}
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(snapshotView(got, keys), snapshotView(want, keys)) {
			t.Fatalf("round %d: the snapshot differs from one built from scratch", round)
		}
		if g, w := got.Diff(prev), want.Diff(prev); !reflect.DeepEqual(g, w) {
			t.Fatalf("round %d: diff %v, want %v", round, g, w)
		}
		if g, w := prev.Diff(got), prev.Diff(want); !reflect.DeepEqual(g, w) {
			t.Fatalf("round %d: reverse diff %v, want %v", round, g, w)
		}
	}
}

// snapshotView is what a snapshot holds, as comparable values: every
// type's resources in order, and what each of keys resolves to.
func snapshotView(s *cache.Snapshot, keys []string) map[string]any {
	v := map[string]any{}
	for _, t := range resource.Types() {
		v[t.Short] = slices.Clone(s.Resources(t))
		for _, k := range keys {
			r, alias := s.Resolve(t, k)
			v[fmt.Sprint(t.Short, " ", k, " ", alias)] = r
		}
	}
	return v
}

// BenchmarkNewSnapshotInterleaved builds snapshots of clusters and their
// endpoints given in turn, as a library user may list them.
func BenchmarkNewSnapshotInterleaved(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		var rs []*resource.Resource
		for i := range n / 2 {
			name := fmt.Sprintf("svc%05d", i)
			rs = append(rs, resource.MustNew(&clusterv3.Cluster{Name: name}),
				resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: name}))
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				cache.MustSnapshot(rs...)
			}
		})
	}
}
