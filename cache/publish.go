package cache

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Publication is a whole configuration for Publish: how nodes map to
// groups, and how each group's snapshot is built.
type Publication struct {
	// GroupOf maps a node to its group, as New's groupOf does; nil means
	// DefaultGroup, without a look at the nodes.
	GroupOf GroupFunc
	// Build builds a group's snapshot. last is the group's snapshot
	// before (nil for a group new to the cache), from which the new one
	// may share what did not change (NewSnapshotFrom). Publish calls it
	// for the group "" and for every group a node is in under GroupOf.
	// Later, for a group a node first comes into, the cache calls it with
	// last nil (as a BuildFunc, with the cache's lock held: it must not
	// call the cache), so it must keep building this configuration.
	Build func(group string, last *Snapshot) (*Snapshot, error)
	// BuildFailed, if set, is told of a failed Build of a group after
	// Publish has returned (for a node new to the group): that group has
	// no snapshot, and its streams wait for one. The failures of the
	// builds Publish makes, it returns.
	BuildFailed func(group string, err error)
}

// BuildError is the error of a Publish whose Build of a group failed.
type BuildError struct {
	// Group is the group whose snapshot did not build.
	Group string
	// Err is Build's error.
	Err error
}

func (e *BuildError) Error() string { return fmt.Sprintf("node group %q: %v", e.Group, e.Err) }

// Unwrap returns Build's error.
func (e *BuildError) Unwrap() error { return e.Err }

// errNoSnapshot is a Build that returned neither a snapshot nor an error.
var errNoSnapshot = errors.New("no snapshot built")

// Publish replaces the whole configuration in one step: the grouping, and
// the snapshot of every group in use, each built first. If a build fails,
// nothing is published, and Publish returns a *BuildError: the
// configuration before keeps serving. Otherwise every watcher is put in
// its group under p.GroupOf and given that group's new snapshot at once,
// and woken once: no stream sees the new grouping with an old snapshot,
// nor one group's new snapshot beside another's old one. Groups that no
// node uses are forgotten (Build builds one again when a node of it
// comes). It returns the changes of each group it published, against the
// snapshot that group had (every key, for a group new to the cache).
//
// Publish orders with SetSnapshot and Update, and supersedes SetGrouping
// followed by a SetSnapshot per group, between which streams may see the
// new grouping with the old snapshots.
func (c *Cache) Publish(p Publication) (map[string]Changes, error) {
	c.pub.Lock()
	defer c.pub.Unlock()
	// The groups in use under the new grouping, and what they hold now.
	c.mu.Lock()
	var next map[*Watcher]string // nil without a grouping: every node is in ""
	last := map[string]*Snapshot{"": nil}
	if p.GroupOf != nil {
		next = make(map[*Watcher]string)
		for _, g := range c.groups {
			for w := range g.watchers {
				to := groupWith(p.GroupOf, w)
				next[w] = to
				last[to] = nil
			}
		}
	}
	for name := range last {
		if g := c.groups[name]; g != nil {
			last[name] = g.snap
		}
	}
	c.mu.Unlock()

	// Built outside the lock, which streams take to start; pub keeps
	// every other publication out meanwhile.
	built := make(map[string]*Snapshot, len(last))
	for _, name := range slices.Sorted(maps.Keys(last)) { // errors in a stable order
		s, err := p.Build(name, last[name])
		if err == nil && s == nil {
			err = errNoSnapshot
		}
		if err != nil {
			return nil, &BuildError{Group: name, Err: err}
		}
		built[name] = s
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.groupOf, c.build = p.GroupOf, p.lazyBuild()
	changes := make(map[string]Changes, len(built))
	for name, s := range built {
		g := c.groupLocked(name)
		changes[name] = s.Diff(g.snap) // what was served: a group may have been built since
		g.snap = s
	}
	// A group that came into use after the groups were counted was built
	// (if at all) by the builder before: it is built again with this one,
	// as the watchers moved into it arrive, or below.
	for name, g := range c.groups {
		if _, ok := built[name]; !ok {
			g.snap = nil
		}
	}
	now := time.Now()
	var moves []move
	for name, g := range c.groups {
		for w := range g.watchers {
			to, ok := next[w]
			if !ok { // it came after the groups were counted
				to = c.groupOfLocked(w)
			}
			if to != name {
				moves = append(moves, move{w, g, to})
			} else if ch := changes[name]; len(ch) > 0 {
				w.notifyLocked(g.snap, ch, now)
			}
		}
	}
	c.moveAllLocked(moves)
	for name, g := range c.groups {
		if g.snap == nil && len(g.watchers) > 0 {
			c.builtGroupLocked(name) // wakes its watchers, if it builds
		}
	}
	return changes, nil
}

// lazyBuild returns p's Build as a BuildFunc, for a group first used after
// Publish.
func (p *Publication) lazyBuild() BuildFunc {
	build, failed := p.Build, p.BuildFailed
	return func(group string) *Snapshot {
		s, err := build(group, nil)
		if err != nil {
			if failed != nil {
				failed(group, err)
			}
			return nil
		}
		return s
	}
}
