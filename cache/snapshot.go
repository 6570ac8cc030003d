// Package cache holds xdsd's published state: an immutable Snapshot per node
// group, swapped atomically, and the Watchers through which streams learn
// which (type, name) pairs changed.
package cache

import (
	"fmt"
	"slices"
	"sort"

	"github.com/xdsd/xdsd/resource"
)

// Snapshot is an immutable set of resources, indexed by type and name. Build
// one with NewSnapshot; never modify it afterwards.
type Snapshot struct {
	types map[*resource.Type]*typeSet
}

type typeSet struct {
	byName  map[string]*resource.Resource
	byAlias map[string]*resource.Resource
}

// NewSnapshot builds a snapshot. Two resources of one type with one name
// are an error, as is an alias that names two resources.
func NewSnapshot(rs ...*resource.Resource) (*Snapshot, error) {
	s := &Snapshot{types: make(map[*resource.Type]*typeSet)}
	for _, r := range rs {
		ts := s.types[r.Type]
		if ts == nil {
			ts = &typeSet{byName: make(map[string]*resource.Resource)}
			s.types[r.Type] = ts
		}
		if _, dup := ts.byName[r.Name]; dup {
			return nil, fmt.Errorf("%s %q: duplicate resource name", r.Type.Short, r.Name)
		}
		ts.byName[r.Name] = r
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
	return s, nil
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

// Each calls f for every resource of type t, in no particular order.
func (s *Snapshot) Each(t *resource.Type, f func(*resource.Resource)) {
	if s == nil || s.types[t] == nil {
		return
	}
	for _, r := range s.types[t].byName {
		f(r)
	}
}

// Resources returns the resources of type t sorted by name.
func (s *Snapshot) Resources(t *resource.Type) []*resource.Resource {
	var out []*resource.Resource
	s.Each(t, func(r *resource.Resource) { out = append(out, r) })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Changes lists, per type, the keys (names and aliases) whose resource
// differs between two snapshots: added, changed or removed, sorted and each
// key once.
type Changes map[*resource.Type][]string

// Diff returns what changed from old to s. A nil old is empty.
func (s *Snapshot) Diff(old *Snapshot) Changes {
	ch := Changes{}
	for _, t := range resource.Types() {
		var keys []string
		s.Each(t, func(r *resource.Resource) {
			if o := old.Get(t, r.Name); o == nil || o.Version != r.Version {
				keys = appendKeys(keys, r)
				if o != nil {
					keys = appendAliases(keys, o)
				}
			}
		})
		old.Each(t, func(o *resource.Resource) {
			if s.Get(t, o.Name) == nil {
				keys = appendKeys(keys, o)
			}
		})
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
