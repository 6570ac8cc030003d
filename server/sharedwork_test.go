package server

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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
		ts := newTypeState(cdsType)
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
			for name := range versions {
				switch rng.IntN(7) {
				case 0, 1:
					versions[name]++
					built[name] = cluster(name, versions[name])
				case 2:
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
// they come to the same work, settles both and checks that they hold the
// same.
func compareWork(t *testing.T, where string, ts, each *typeState, snap *cache.Snapshot, delta bool) {
	t.Helper()
	got, want := ts.evaluate(snap, delta), each.evaluateEach(snap, delta)
	if g, w := itemSet(got.upserts), itemSet(want.upserts); !maps.Equal(g, w) {
		t.Fatalf("%s: upserts %v, key by key %v", where, g, w)
	}
	if g, w := slices.Sorted(slices.Values(got.removals)), slices.Sorted(slices.Values(want.removals)); !slices.Equal(g, w) {
		t.Fatalf("%s: removals %v, key by key %v", where, g, w)
	}
	ts.settle(got, true, snap)
	each.settle(want, true, snap)
	if g, w := maps.Collect(ts.held()), maps.Collect(each.held()); !maps.Equal(g, w) {
		t.Fatalf("%s: holds %v, key by key %v", where, g, w)
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

// itemSet maps an upsert's key to its resource.
func itemSet(items []item) map[string]*resource.Resource {
	m := make(map[string]*resource.Resource, len(items))
	for _, it := range items {
		m[it.key] = it.res
	}
	return m
}
