package server

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// TestSharedWorkMatchesEachKey: the work evaluate takes from the
// transition for streams that share a list (sharedWork), or whole for a
// stream's first evaluation (wholeWork), is the work it would compute key
// by key, and settling it leaves the stream holding the same. Streams
// subscribe as wildcards, to every cluster (one of which they may say they
// have), to all but one, or to one that does not exist besides or instead.
// Snapshots change versions, add and remove clusters and rebuild some
// unchanged; streams are wildcards or name every cluster, are told every
// change, part of it, another key in place of one, or several
// publications' worth (overlapping or not), or re-evaluate all.
func TestSharedWorkMatchesEachKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	cluster := func(name string, v int) *resource.Resource {
		return resource.MustNew(&clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Duration(v+1) * time.Second)})
	}
	fast, whole := 0, 0
	for trial := range 400 {
		n := 1 + rng.IntN(8)
		versions := map[string]int{}
		built := map[string]*resource.Resource{}
		for i := range n {
			name := fmt.Sprintf("c%d", i)
			versions[name] = 0
			built[name] = cluster(name, 0)
		}
		snapshot := func() *cache.Snapshot {
			names := slices.Sorted(maps.Keys(versions))
			rs := make([]*resource.Resource, len(names))
			for i, name := range names {
				rs[i] = built[name]
			}
			return cache.MustSnapshot(rs...)
		}
		delta := rng.IntN(2) == 0
		ts := newTypeState(cdsType, delta)
		ts.active = true
		names := slices.Sorted(maps.Keys(versions))
		switch rng.IntN(8) {
		case 0, 1:
			ts.subscribe([]string{"*"}, nil, true)
		case 2:
			ts.subscribe(append(names, "*"), nil, true)
		case 3: // all but one
			ts.subscribe(names[1:], nil, true)
		case 4: // one that does not exist besides
			ts.subscribe(append(names, "c99"), nil, true)
		case 5: // one that does not exist in place of one
			ts.subscribe(append(names[1:], "c99"), nil, true)
		case 6: // all, one of which the client says it has (D6)
			ts.subscribe(names, nil, true)
			ts.holdItems([]item{{key: names[0], res: resource.Placeholder(cdsType, names[0], built[names[0]].Version)}})
		default:
			ts.subscribe(names, nil, true)
		}
		snap := snapshot()
		each := ts.copyForTest()
		if _, ok := ts.wholeWork(snap, ts.t, ts.wildcard, ts.reeval); ok {
			whole++
		}
		compareWork(t, fmt.Sprintf("trial %d, first evaluation", trial), ts, each, snap, delta)
		for step := range 6 {
			old := snap
			every := rng.IntN(6) == 0 // every cluster changes
			for name := range versions {
				switch {
				case every || rng.IntN(3) == 0:
					versions[name]++
					built[name] = cluster(name, versions[name])
				case rng.IntN(4) == 0:
					built[name] = cluster(name, versions[name]) // rebuilt, unchanged
				}
			}
			if rng.IntN(8) == 0 { // a cluster added, or one removed
				name := fmt.Sprintf("c%d", 8+rng.IntN(4))
				if _, ok := versions[name]; ok {
					delete(versions, name)
					delete(built, name)
				} else {
					versions[name] = 0
					built[name] = cluster(name, 0)
				}
			}
			snap = snapshot()
			keys := snap.Diff(old)[cdsType]
			switch rng.IntN(7) {
			case 0: // told part of it
				if len(keys) > 0 {
					keys = keys[:rng.IntN(len(keys))]
				}
				ts.markDirty(keys)
			case 5: // told as many keys, one of them not a change
				if len(keys) > 0 {
					keys = slices.Clone(keys)
					keys[rng.IntN(len(keys))] = "unchanged"
					slices.Sort(keys)
				}
				ts.markDirty(keys)
			case 1: // two publications' worth
				half := rng.IntN(len(keys) + 1)
				ts.markDirty(keys[:half])
				ts.markDirty(keys[half:])
			case 2:
				ts.reeval = true
			case 6: // two overlapping publications' worth, which miss a change
				if len(keys) >= 2 {
					h := rng.IntN(len(keys) - 1)
					ts.markDirty(keys[:h+1])
					ts.markDirty(keys[h : len(keys)-1])
				}
			default:
				ts.markDirty(keys)
			}
			each := ts.copyForTest()
			_, shared := ts.sharedWork(snap, ts.t, ts.wildcard, ts.reeval, ts.dirty)
			if shared {
				fast++
			}
			compareWork(t, fmt.Sprintf("trial %d step %d (shared work %v)", trial, step, shared), ts, each, snap, delta)
		}
	}
	if fast < 200 || whole < 100 {
		t.Fatalf("only %d steps took the shared work and %d first evaluations the whole: the test does not exercise them", fast, whole)
	}
}

// compareWork evaluates ts and, key by key, each, a copy of it, checks that
// they come to the same work, settles both (each entry by entry) and checks
// that their lists say the same of every key.
func compareWork(t *testing.T, where string, ts, each *typeState, snap *cache.Snapshot, delta bool) {
	t.Helper()
	got, want := ts.evaluate(snap), each.evaluateEach(snap)
	if g, w := itemSet(got.upserts), itemSet(want.upserts); !maps.Equal(g, w) {
		t.Fatalf("%s: upserts %v, key by key %v", where, g, w)
	}
	if g, w := slices.Sorted(slices.Values(got.removals)), slices.Sorted(slices.Values(want.removals)); !slices.Equal(g, w) {
		t.Fatalf("%s: removals %v, key by key %v", where, g, w)
	}
	ts.settle(got, true, snap)
	each.settleEach(want, true, snap) // not through advance or adoptWhole either
	if g, w := entrySet(ts), entrySet(each); !maps.Equal(g, w) {
		t.Fatalf("%s: entries %v, key by key %v", where, g, w)
	}
	if ts.version() != each.version() {
		t.Fatalf("%s: version %s, key by key %s", where, ts.version(), each.version())
	}
}

// copyForTest returns a copy of ts that changes independently of it: a
// shared list is copied before any change, and an owned one is cloned.
func (ts *typeState) copyForTest() *typeState {
	c := *ts
	if c.shared == nil {
		c.keys = slices.Clone(c.keys)
	}
	c.dirty = slices.Clone(c.dirty)
	return &c
}

// entrySet maps each key of ts's list to its flags and resource.
func entrySet(ts *typeState) map[string]keyEntry {
	m := make(map[string]keyEntry, len(ts.keys))
	for _, e := range ts.keys {
		m[e.key] = e
	}
	return m
}

// itemSet maps an upsert's key to its resource.
func itemSet(items []item) map[string]*resource.Resource {
	m := make(map[string]*resource.Resource, len(items))
	for _, it := range items {
		m[it.key] = it.res
	}
	return m
}

// TestTransitionCovers checks covers against a plain count, with more
// changed resources than one word of its bitset holds, several lists
// (overlapping, with keys that are not changes), and, for its cache of a
// single list, prefixes of one array and several lists that start where a
// cached one does.
func TestTransitionCovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cluster := func(name string, v int) *resource.Resource {
		return resource.MustNew(&clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Duration(v+1) * time.Second)})
	}
	for trial := range 50 {
		n := 70 + rng.IntN(200)
		before, after := make([]*resource.Resource, n), make([]*resource.Resource, n)
		var names []string
		for i := range n {
			name := fmt.Sprintf("c%04d", i)
			names = append(names, name)
			before[i], after[i] = cluster(name, 0), cluster(name, 0)
			if rng.IntN(3) > 0 {
				after[i] = cluster(name, 1)
			}
		}
		snap0, snap1 := cache.MustSnapshot(before...), cache.MustSnapshot(after...)
		tr := transitionOf(snap1, cdsType, canonicalOf(snap0, cdsType, fHas))
		changed := map[string]bool{}
		for _, it := range tr.items {
			changed[it.key] = true
		}
		plain := func(lists [][]string) bool {
			seen := map[string]bool{}
			for _, l := range lists {
				for _, k := range l {
					if changed[k] {
						seen[k] = true
					}
				}
			}
			return len(seen) == len(changed)
		}
		check := func(where string, lists [][]string) {
			t.Helper()
			if got, want := tr.covers(lists), plain(lists); got != want {
				t.Fatalf("trial %d, %s: covers %v, counted %v (%d changes, %d lists)", trial, where, got, want, len(changed), len(lists))
			}
		}
		base := slices.Clone(names)
		rng.Shuffle(len(base), func(i, j int) { base[i], base[j] = base[j], base[i] })
		var unchanged []string
		for _, k := range names {
			if !changed[k] {
				unchanged = append(unchanged, k)
			}
		}
		if len(unchanged) > 0 && len(changed) > 1 {
			pad := slices.Repeat([]string{unchanged[0]}, n-1)
			for _, lists := range [][][]string{{base}, {base[:1], pad}, {base}, {base[:1], pad}} {
				check("a single list and several that start as it does", lists)
			}
		}
		for q := range 200 {
			var lists [][]string
			if q%3 == 0 { // prefixes of one array
				lists = [][]string{base[:len(changed)+rng.IntN(n-len(changed)+1)]}
			} else {
				for range 1 + rng.IntN(4) {
					lo := rng.IntN(n)
					if hi := lo + rng.IntN(n-lo+1); hi > lo {
						lists = append(lists, base[lo:hi])
					}
				}
			}
			if len(lists) > 0 {
				check(fmt.Sprintf("query %d", q), lists)
			}
		}
	}
}

// TestCurrentLeavesSharedUpsertsAlone: a one-shot fetch of every resource
// takes the snapshot's shared list of them (wholeWork); sorting the
// response must not write into it, however many fetches run at once (run
// with -race).
func TestCurrentLeavesSharedUpsertsAlone(t *testing.T) {
	var rs []*resource.Resource
	var names []string
	for i := range 200 {
		name := fmt.Sprintf("c%04d", 199-i)
		rs = append(rs, resource.MustNew(&clusterv3.Cluster{Name: name}))
		names = append(names, name)
	}
	snap := cache.MustSnapshot(rs...)
	all := allItems(snap, cdsType)
	ts := newTypeState(cdsType, false)
	ts.setNames(nil)
	if w := ts.evaluate(snap); len(w.upserts) == 0 || &w.upserts[0] != &all[0] {
		t.Fatal("a fetch of everything did not take the shared list")
	}
	want := slices.Clone(all)
	s := &Server{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				s.current(snap, cdsType, nil, false)
				s.current(snap, cdsType, names, false)
			}
		})
	}
	wg.Wait()
	if !slices.Equal(all, want) {
		t.Fatal("fetches wrote into the shared list")
	}
}

// TestTransitionLookupAllocatesNothing: streams look up their transition
// on every push; with canonical ids past those Go boxes for free, a key
// made per lookup would allocate each time.
func TestTransitionLookupAllocatesNothing(t *testing.T) {
	canonicalIDs.Add(1000)
	rs := []*resource.Resource{resource.MustNew(&clusterv3.Cluster{Name: "a"})}
	c := canonicalOf(cache.MustSnapshot(rs...), cdsType, fHas)
	later := cache.MustSnapshot(rs...)
	transitionOf(later, cdsType, c)
	if n := testing.AllocsPerRun(100, func() { transitionOf(later, cdsType, c) }); n != 0 {
		t.Fatalf("a transition lookup allocates %v times", n)
	}
}
