// Package cache holds xdsd's published state: an immutable Snapshot per node
// group, swapped atomically, and the Watchers through which streams learn
// which (type, name) pairs changed.
package cache

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/xdsd/xdsd/resource"
)

// Snapshot is an immutable set of resources, indexed by type and name. Build
// one with NewSnapshot; never modify it afterwards.
type Snapshot struct {
	types map[*resource.Type]*typeSet
	memo  sync.Map // see memos
}

type typeSet struct {
	byName  map[string]*resource.Resource
	byAlias map[string]*resource.Resource
	sorted  []*resource.Resource // by name
}

// NewSnapshot builds a snapshot. Two resources of one type with one name
// are an error, as is an alias that names two resources.
func NewSnapshot(rs ...*resource.Resource) (*Snapshot, error) { return NewSnapshotFrom(nil, rs...) }

// NewSnapshotFrom builds the snapshot of rs, as NewSnapshot does, reusing
// what it can of prev (which may be nil). A type whose resources are
// prev's, in prev's order, is shared with prev; one whose resources keep
// prev's names in prev's order, some replaced by new versions (and neither
// the old nor the new having aliases), is prev's index copied with the
// replacements, not built anew. So publishing a change to a few of many
// resources costs a copy of one type's index rather than a rebuild.
func NewSnapshotFrom(prev *Snapshot, rs ...*resource.Resource) (*Snapshot, error) {
	if err := checkMade(rs); err != nil {
		return nil, err
	}
	lists := splitByType(rs)
	s := &Snapshot{types: make(map[*resource.Type]*typeSet, len(lists))}
	add := func(t *resource.Type, list []*resource.Resource) error {
		var old *typeSet
		if prev != nil {
			old = prev.types[t]
		}
		ts, err := newTypeSet(old, list)
		s.types[t] = ts
		return err
	}
	for _, t := range resource.Types() { // errors in a stable order
		if list, ok := lists[t]; ok {
			if err := add(t, list); err != nil {
				return nil, err
			}
			delete(lists, t)
		}
	}
	for t, list := range lists { // types that resource.Types does not list, if any
		if err := add(t, list); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// splitByType returns rs by type, in their order. A type's resources given
// in one run share rs's array, which is never written to.
func splitByType(rs []*resource.Resource) map[*resource.Type][]*resource.Resource {
	lists := make(map[*resource.Type][]*resource.Resource)
	for i := 0; i < len(rs); {
		t, j := rs[i].Type, i+1
		for j < len(rs) && rs[j].Type == t {
			j++
		}
		if l, ok := lists[t]; ok {
			// l's first run is capped at its end: the first append copies
			// it out of rs, and later ones grow the copy.
			lists[t] = append(l, rs[i:j]...)
		} else {
			lists[t] = rs[i:j:j]
		}
		i = j
	}
	return lists
}

// newTypeSet indexes one type's resources, from old's index if they keep
// its names in its order (see NewSnapshotFrom).
func newTypeSet(old *typeSet, list []*resource.Resource) (*typeSet, error) {
	if old != nil && len(old.sorted) == len(list) {
		var changed []int
		derived := true
		for i, r := range list {
			if o := old.sorted[i]; r != o {
				if r.Name != o.Name || len(r.Aliases) > 0 || len(o.Aliases) > 0 {
					derived = false
					break
				}
				changed = append(changed, i)
			}
		}
		switch {
		case derived && len(changed) == 0:
			return old, nil // typeSets are never modified once built
		case derived:
			ts := &typeSet{byName: maps.Clone(old.byName), byAlias: old.byAlias, sorted: slices.Clone(old.sorted)}
			for _, i := range changed {
				ts.sorted[i] = list[i]
				ts.byName[list[i].Name] = list[i]
			}
			return ts, nil
		}
	}
	ts := &typeSet{byName: make(map[string]*resource.Resource, len(list)), sorted: slices.Clone(list)}
	for _, r := range list {
		n := len(ts.byName)
		ts.byName[r.Name] = r
		if len(ts.byName) == n { // one hash per resource, not a lookup and then an insert
			return nil, fmt.Errorf("%s %q: duplicate resource name", r.Type.Short, r.Name)
		}
		for _, a := range r.Aliases {
			if ts.byAlias == nil {
				ts.byAlias = make(map[string]*resource.Resource)
			}
			if other, dup := ts.byAlias[a]; dup {
				return nil, fmt.Errorf("%s %q: alias %q also names %q", r.Type.Short, r.Name, a, other.Name)
			}
			ts.byAlias[a] = r
		}
	}
	byName := func(a, b *resource.Resource) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(ts.sorted, byName) { // often given in order
		slices.SortFunc(ts.sorted, byName)
	}
	return ts, nil
}

// With returns a snapshot of s's resources and rs, where each of rs adds
// a resource or replaces s's of the same type and name. s may be nil.
func (s *Snapshot) With(rs ...*resource.Resource) (*Snapshot, error) {
	type key struct {
		t    *resource.Type
		name string
	}
	if err := checkMade(rs); err != nil {
		return nil, err
	}
	repl := make(map[key]*resource.Resource, len(rs))
	for _, r := range rs {
		repl[key{r.Type, r.Name}] = r
	}
	all := s.All()
	for i, r := range all {
		if n, ok := repl[key{r.Type, r.Name}]; ok {
			all[i] = n // in place, so the type's index is derived from s's
			delete(repl, key{r.Type, r.Name})
		}
	}
	for _, r := range rs {
		if k := (key{r.Type, r.Name}); repl[k] == r {
			all = append(all, r)
			delete(repl, k) // once, though rs may name it again
		}
	}
	return NewSnapshotFrom(s, all...)
}

// Without returns a snapshot of s's resources but those of type t named
// names. s may be nil.
func (s *Snapshot) Without(t *resource.Type, names ...string) *Snapshot {
	drop := make(map[string]bool, len(names))
	for _, n := range names {
		drop[n] = true
	}
	all := s.All()
	kept := all[:0]
	for _, r := range all {
		if r.Type != t || !drop[r.Name] {
			kept = append(kept, r)
		}
	}
	next, err := NewSnapshotFrom(s, kept...)
	if err != nil {
		panic(err) // a subset of a snapshot's resources is a valid snapshot
	}
	return next
}

// All returns every resource of s, type by type in ADS order, each type's
// sorted by name, in a new slice. A nil s has none.
func (s *Snapshot) All() []*resource.Resource {
	if s == nil {
		return nil
	}
	types := slices.SortedFunc(maps.Keys(s.types), func(a, b *resource.Type) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), strings.Compare(a.URL, b.URL))
	})
	var out []*resource.Resource
	for _, t := range types {
		out = append(out, s.types[t].sorted...)
	}
	return out
}

// checkMade returns an error if one of rs was not made by resource.New.
func checkMade(rs []*resource.Resource) error {
	for i, r := range rs {
		if r == nil || r.Type == nil || r.Body == nil {
			return fmt.Errorf("resource #%d: not made by resource.New", i+1)
		}
	}
	return nil
}

// MustSnapshot is NewSnapshot that panics on error, for tests and examples.
func MustSnapshot(rs ...*resource.Resource) *Snapshot {
	s, err := NewSnapshot(rs...)
	if err != nil {
		panic(err)
	}
	return s
}

// Get returns the resource of type t named name, or nil.
func (s *Snapshot) Get(t *resource.Type, name string) *resource.Resource {
	if s == nil {
		return nil
	}
	if ts := s.types[t]; ts != nil {
		return ts.byName[name]
	}
	return nil
}

// GetBytes is Get for a name given as bytes (still encoded in a request,
// say), without making a string of it.
func (s *Snapshot) GetBytes(t *resource.Type, name []byte) *resource.Resource {
	if s == nil {
		return nil
	}
	if ts := s.types[t]; ts != nil {
		return ts.byName[string(name)]
	}
	return nil
}

// Resolve returns the resource of type t whose name or alias is key, and
// whether key was an alias (PROTOCOL D7).
func (s *Snapshot) Resolve(t *resource.Type, key string) (r *resource.Resource, alias bool) {
	if s == nil {
		return nil, false
	}
	ts := s.types[t]
	if ts == nil {
		return nil, false
	}
	if r := ts.byName[key]; r != nil {
		return r, false
	}
	if r := ts.byAlias[key]; r != nil {
		return r, true
	}
	return nil, false
}

// Len returns the number of resources of type t.
func (s *Snapshot) Len(t *resource.Type) int {
	if s == nil || s.types[t] == nil {
		return 0
	}
	return len(s.types[t].byName)
}

// Each calls f for every resource of type t, in the order of their names.
func (s *Snapshot) Each(t *resource.Type, f func(*resource.Resource)) {
	for _, r := range s.Resources(t) {
		f(r)
	}
}

// Resources returns the resources of type t sorted by name. The slice is
// the snapshot's own: do not modify it.
func (s *Snapshot) Resources(t *resource.Type) []*resource.Resource {
	if s == nil || s.types[t] == nil {
		return nil
	}
	return s.types[t].sorted
}

// Memo returns the value memoized in s under key, calling build to make it
// the first time. It lets users of a snapshot share data derived from it
// (it is dropped with the snapshot); build must depend only on the snapshot
// and key, and key must be comparable. Safe for concurrent use: callers
// that race to make the value may each run build, and all get the one value
// kept.
func (s *Snapshot) Memo(key any, build func() any) any {
	if v, ok := s.memo.Load(key); ok {
		return v
	}
	v, _ := s.memo.LoadOrStore(key, build())
	return v
}

// Changes lists, per type, the keys (names and aliases) whose resource
// differs between two snapshots: added, changed or removed, sorted and each
// key once.
type Changes map[*resource.Type][]string

// Diff returns what changed from old to s. A nil old is empty. It walks
// both snapshots' sorted lists side by side: a resource that the two share
// (the configuration directory keeps what did not change) costs a pointer
// comparison, not a lookup.
func (s *Snapshot) Diff(old *Snapshot) Changes {
	ch := Changes{}
	for _, t := range resource.Types() {
		if s != nil && old != nil && s.types[t] == old.types[t] {
			continue // shared: unchanged
		}
		var keys []string
		cur, prev := s.Resources(t), old.Resources(t)
		for len(cur) > 0 || len(prev) > 0 {
			switch {
			case len(cur) > 0 && len(prev) > 0 && cur[0] == prev[0]:
				cur, prev = cur[1:], prev[1:]
			case len(prev) == 0 || len(cur) > 0 && cur[0].Name < prev[0].Name: // new
				keys = appendKeys(keys, cur[0])
				cur = cur[1:]
			case len(cur) == 0 || prev[0].Name < cur[0].Name: // gone
				keys = appendKeys(keys, prev[0])
				prev = prev[1:]
			default: // in both
				if r, o := cur[0], prev[0]; r.Version != o.Version {
					keys = appendAliases(appendKeys(keys, r), o)
				}
				cur, prev = cur[1:], prev[1:]
			}
		}
		if len(keys) > 0 {
			slices.Sort(keys) // an alias may be listed for both versions
			ch[t] = slices.Compact(keys)
		}
	}
	return ch
}

func appendKeys(keys []string, r *resource.Resource) []string {
	return appendAliases(append(keys, r.Name), r)
}

func appendAliases(keys []string, r *resource.Resource) []string {
	return append(keys, r.Aliases...)
}
