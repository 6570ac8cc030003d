package cache_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// generation is a publication whose every group holds one cluster,
// "<group>@<gen>", and whose grouping puts node i in group
// g<(i+gen) mod 3>: each publication moves every node.
func generation(gen int) cache.Publication {
	return cache.Publication{
		GroupOf: func(n *corev3.Node) string { return groupAt(n.GetId(), gen) },
		Build: func(group string, _ *cache.Snapshot) (*cache.Snapshot, error) {
			return cache.NewSnapshot(cluster(fmt.Sprintf("%s@%d", group, gen)))
		},
	}
}

// groupAt is the group of node id ("n<i>") in generation gen.
func groupAt(id string, gen int) string {
	i, _ := strconv.Atoi(strings.TrimPrefix(id, "n"))
	return fmt.Sprintf("g%d", (i+gen)%3)
}

// seen returns the group and generation of the one cluster of a
// generation's snapshot.
func seen(t *testing.T, s *cache.Snapshot) (group string, gen int) {
	t.Helper()
	rs := s.Resources(resource.Lookup(resource.ClusterType))
	if len(rs) != 1 {
		t.Fatalf("snapshot has %d clusters, want 1", len(rs))
	}
	group, g, _ := strings.Cut(rs[0].Name, "@")
	gen, err := strconv.Atoi(g)
	if err != nil {
		t.Fatalf("cluster %q", rs[0].Name)
	}
	return group, gen
}

// TestPublish checks that Publish swaps the grouping and every group's
// snapshot as one (PROTOCOL N1: a node sees what its group's rules give
// it), or nothing at all.
func TestPublish(t *testing.T) {
	t.Run("N1_readers_racing_publications_see_whole_generations", func(t *testing.T) {
		// Each watcher's reader checks every snapshot it takes: of its
		// group under the same generation's grouping, and never older
		// than the last it took. Publishing the grouping and then the
		// snapshots one by one fails both.
		const nodes, gens = 8, 300
		c := cache.New(nil)
		if _, err := c.Publish(generation(0)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, nodes)
		for i := range nodes {
			id := fmt.Sprintf("n%d", i)
			woken := make(chan struct{}, 1)
			w := c.WatchFunc(&corev3.Node{Id: id}, func() {
				select {
				case woken <- struct{}{}:
				default:
				}
			})
			wg.Go(func() {
				defer w.Close()
				last := -1
				check := func() error {
					snap, _, _ := w.Take()
					group, gen := seen(t, snap)
					if want := groupAt(id, gen); group != want {
						return fmt.Errorf("%s sees %s@%d: the snapshot of another group than its own (%s) in that generation", id, group, gen, want)
					}
					if gen < last {
						return fmt.Errorf("%s sees generation %d after %d", id, gen, last)
					}
					last = gen
					return nil
				}
				if err := check(); err != nil {
					errs <- err
					return
				}
				for {
					select {
					case <-woken:
						if err := check(); err != nil {
							errs <- err
							return
						}
					case <-stop:
						if err := check(); err != nil {
							errs <- err
						} else if last != gens {
							errs <- fmt.Errorf("%s ends at generation %d, want %d", id, last, gens)
						}
						return
					}
				}
			})
		}
		for gen := 1; gen <= gens; gen++ {
			if _, err := c.Publish(generation(gen)); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("N1_a_failed_build_publishes_nothing", func(t *testing.T) {
		c := cache.New(nil)
		if _, err := c.Publish(generation(0)); err != nil {
			t.Fatal(err)
		}
		w := c.Watch(&corev3.Node{Id: "n1"})
		defer w.Close()
		before, _, _ := w.Take()
		kicked(w) // for the snapshot it started with
		bad := generation(1)
		build := bad.Build
		bad.Build = func(group string, last *cache.Snapshot) (*cache.Snapshot, error) {
			if group == "g2" { // n1's group in generation 1
				return nil, errors.New("duplicate cluster")
			}
			return build(group, last)
		}
		_, err := c.Publish(bad)
		be, ok := errors.AsType[*cache.BuildError](err)
		if !ok || be.Group != "g2" || be.Err.Error() != "duplicate cluster" {
			t.Fatalf("Publish = %v, want the BuildError of group g2", err)
		}
		if w.HasNews() || kicked(w) {
			t.Fatal("a failed publication woke a watcher")
		}
		if g := c.GroupOf(&corev3.Node{Id: "n1"}); g != "g1" {
			t.Fatalf("after a failed publication n1 is in group %s, want g1 as before", g)
		}
		if s := c.Snapshot("g1"); s != before {
			t.Fatal("after a failed publication group g1 has another snapshot")
		}
		if group, gen := seen(t, c.Snapshot("")); group != "" || gen != 0 {
			t.Fatalf("after a failed publication group \"\" has %s@%d, want @0 as before", group, gen)
		}
	})

	t.Run("N1_a_moved_watcher_is_woken_once_with_its_new_group", func(t *testing.T) {
		c := cache.New(nil)
		if _, err := c.Publish(generation(0)); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		n := 0
		w := c.WatchFunc(&corev3.Node{Id: "n0"}, func() {
			mu.Lock()
			n++
			mu.Unlock()
		})
		defer w.Close()
		w.Take()
		changes, err := c.Publish(generation(1))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := n
		mu.Unlock()
		if got != 1 {
			t.Fatalf("woken %d times by one publication, want 1", got)
		}
		snap, pending, _ := w.Take()
		if group, gen := seen(t, snap); group != "g1" || gen != 1 || !pending.All {
			t.Fatalf("after the move the watcher has %s@%d (all changed: %v), want g1@1, all changed", group, gen, pending.All)
		}
		for _, g := range []string{"", "g1"} {
			if len(changes[g]) == 0 {
				t.Fatalf("changes %v lack group %q", changes, g)
			}
		}
	})

	t.Run("N1_a_group_first_used_later_is_built_then", func(t *testing.T) {
		c := cache.New(nil)
		p := generation(4)
		var failed []string
		p.BuildFailed = func(group string, err error) { failed = append(failed, group+": "+err.Error()) }
		build := p.Build
		p.Build = func(group string, last *cache.Snapshot) (*cache.Snapshot, error) {
			if group == "g2" {
				return nil, errors.New("broken")
			}
			return build(group, last)
		}
		if _, err := c.Publish(p); err != nil {
			t.Fatal(err) // no node is in g2 yet
		}
		w := c.Watch(&corev3.Node{Id: "n0"}) // group g1
		defer w.Close()
		if snap, _, _ := w.Take(); snap == nil {
			t.Fatal("a node of a group first used after Publish has no snapshot")
		} else if group, gen := seen(t, snap); group != "g1" || gen != 4 {
			t.Fatalf("got %s@%d, want g1@4", group, gen)
		}
		w2 := c.Watch(&corev3.Node{Id: "n1"}) // group g2, which does not build
		defer w2.Close()
		if snap, _, _ := w2.Take(); snap != nil || len(failed) != 1 || failed[0] != "g2: broken" {
			t.Fatalf("snapshot %v, failures %v: want none and g2's", snap, failed)
		}
	})

	t.Run("N1_a_watcher_that_joins_during_the_build_gets_the_new_publication", func(t *testing.T) {
		// A node of a group no one used joins while Publish builds: the
		// old builder builds its group, which the new publication must
		// replace.
		groupOf := func(n *corev3.Node) string { return n.GetId() } // a node's group is its id
		pub := func(gen int, hold chan struct{}) cache.Publication {
			return cache.Publication{GroupOf: groupOf, Build: func(group string, _ *cache.Snapshot) (*cache.Snapshot, error) {
				if hold != nil && group == "" {
					hold <- struct{}{} // tell the test the build runs
					<-hold
				}
				return cache.NewSnapshot(cluster(fmt.Sprintf("%s@%d", group, gen)))
			}}
		}
		c := cache.New(nil)
		if _, err := c.Publish(pub(1, nil)); err != nil {
			t.Fatal(err)
		}
		hold := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := c.Publish(pub(2, hold)); err != nil {
				t.Error(err)
			}
		}()
		<-hold // Publish(2) is between its phases
		w := c.WatchFunc(&corev3.Node{Id: "x"}, func() {})
		defer w.Close()
		hold <- struct{}{}
		<-done
		snap, _, _ := w.Take()
		if g, gen := seen(t, snap); gen != 2 {
			t.Fatalf("after Publish(2) returned, watcher of group %q serves generation %d", g, gen)
		}
	})
}
