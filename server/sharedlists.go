package server

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// A fleet of Envoys typically holds, on every stream, every cluster (a
// wildcard) and the endpoints of every cluster: the same list of keys at the
// same versions. Such streams share one list per snapshot, type and flags
// instead of keeping a copy each (32 bytes per key per stream), and move to
// the next snapshot's list when they are sent its changes.

// canonical is a snapshot's resources of one type as a key list whose
// entries all have the same flags: all hold their resource (fHas), or, for
// a new stream's first subscription (adoptNamed), all name it and none
// holds it.
type canonical struct {
	keys  []keyEntry
	xor   uint64
	ttls  int
	rs    []*resource.Resource // the snapshot's, which keys mirrors
	flags uint8
	id    uint64 // unique among canonical lists
	// from is the memo key of the transitions from this list
	// (transitionKey{id}), boxed once: a lookup, per stream and push,
	// then allocates nothing.
	from any

	// Every resource as the entries of a response, made on first use.
	sotwOnce, deltaOnce sync.Once
	sotw, delta         []byte
}

// sotwEntries returns the resources field of a SotW response carrying
// every resource of the list (the bytes are shared: do not modify them).
func (c *canonical) sotwEntries() []byte {
	c.sotwOnce.Do(func() { c.sotw = concat(c.rs, (*resource.Resource).SotWField) })
	return c.sotw
}

// deltaEntries is sotwEntries for an incremental response.
func (c *canonical) deltaEntries() []byte {
	c.deltaOnce.Do(func() { c.delta = concat(c.rs, (*resource.Resource).DeltaField) })
	return c.delta
}

func concat(rs []*resource.Resource, field func(*resource.Resource) []byte) []byte {
	n := 0
	for _, r := range rs {
		n += len(field(r))
	}
	out := make([]byte, 0, n)
	for _, r := range rs {
		out = append(out, field(r)...)
	}
	return out
}

// transitionKey memoizes a transition by its list's id rather than the
// list itself, which the later snapshot need not keep alive.
type transitionKey struct{ from uint64 }

// canonicalIDs numbers canonical lists.
var canonicalIDs atomic.Uint64

// canonicalKey is the memo key of a canonical list: a type's order and
// the flags. Keys are used by address, from canonicalKeys, so that making
// one an interface value allocates nothing.
type canonicalKey struct {
	order int
	flags uint8
}

var canonicalKeys [resource.NumTypes][256]canonicalKey

func init() {
	for order := range canonicalKeys {
		for flags := range canonicalKeys[order] {
			canonicalKeys[order][flags] = canonicalKey{order, uint8(flags)}
		}
	}
}

// canonicalOf returns snap's canonical list of t with flags, made once per
// snapshot.
func canonicalOf(snap *cache.Snapshot, t *resource.Type, flags uint8) *canonical {
	return snap.Memo(&canonicalKeys[t.Order][flags], func() any {
		rs := snap.Resources(t)
		c := &canonical{keys: make([]keyEntry, len(rs)), rs: rs, flags: flags, id: canonicalIDs.Add(1)}
		c.from = transitionKey{c.id}
		for i, r := range rs {
			c.keys[i] = keyEntry{key: r.Name, flags: flags}
			if flags&fHas == 0 {
				continue // names, none held (adoptNamed)
			}
			c.keys[i].res = r
			c.xor ^= r.Hash()
			if r.TTL > 0 {
				c.ttls++
			}
		}
		return c
	}).(*canonical)
}

// minShared is the length below which a list is not worth sharing. (Tests
// lower it, to share every list they can.)
var minShared = 16

// share replaces the list with snap's canonical list of t if they are the
// same: every resource of the type, each held at its current version, all
// with the same flags, nothing to resend or dropped.
func (l *keyList) share(snap *cache.Snapshot, t *resource.Type) {
	if l.shared != nil || len(l.keys) == 0 || len(l.keys) < minShared || l.nResend > 0 || l.nDropped > 0 {
		return
	}
	rs := snap.Resources(t)
	if len(rs) != len(l.keys) {
		return
	}
	flags := l.keys[0].flags
	if flags&fHas == 0 {
		return
	}
	for i := range l.keys {
		// Versions, not pointers: a source may rebuild a resource unchanged.
		if e := &l.keys[i]; e.flags != flags || e.res == nil || e.res.Version != rs[i].Version || e.key != rs[i].Name {
			return
		}
	}
	c := canonicalOf(snap, t, flags)
	l.keys, l.shared, l.xor, l.ttls = c.keys, c, c.xor, c.ttls
}

// transition is what differs between a canonical list and the same type's
// resources in a later snapshot, computed once for all the streams that
// make the move.
type transition struct {
	sameKeys bool // the later snapshot has the same names
	// items are the upserts that make the move, one per changed resource
	// in the snapshot's order (if sameKeys): shared by every stream that
	// makes it, so read only, and full (an append copies).
	items []item
	// changed holds the index in items of each changed name.
	changed map[string]int
	// covered caches covers's answer for the last single list it was
	// asked about.
	covered atomic.Pointer[coverage]
}

// coverage is covers's answer for the list that starts at first and has n
// keys.
type coverage struct {
	first *string
	n     int
	ok    bool
}

// transitionOf returns the transition from the canonical list c to snap's
// resources of t, made once per snapshot and list.
func transitionOf(snap *cache.Snapshot, t *resource.Type, c *canonical) *transition {
	return snap.Memo(c.from, func() any {
		rs := snap.Resources(t)
		tr := &transition{sameKeys: len(rs) == len(c.rs), changed: map[string]int{}}
		for i := 0; tr.sameKeys && i < len(rs); i++ {
			switch {
			case rs[i].Name != c.rs[i].Name:
				tr.sameKeys = false
			case rs[i].Version != c.rs[i].Version:
				tr.changed[rs[i].Name] = len(tr.items)
				tr.items = append(tr.items, item{key: rs[i].Name, res: rs[i]})
			}
		}
		tr.items = slices.Clip(tr.items)
		return tr
	}).(*transition)
}

// changedTo returns the resource the transition changes key to, or nil.
func (tr *transition) changedTo(key string) *resource.Resource {
	if i, ok := tr.changed[key]; ok {
		return tr.items[i].res
	}
	return nil
}

// covers reports whether lists, lists of changed keys the cache shares
// between streams (one per publication), name every resource the
// transition changes. The answer for a single list, the common case, is
// kept, so the streams that make the move after one publication compute
// it once.
func (tr *transition) covers(lists [][]string) bool {
	total := 0
	for _, keys := range lists {
		total += len(keys)
	}
	switch {
	case len(tr.items) == 0:
		return true
	case total < len(tr.items):
		return false
	case len(lists) == 1:
		if c := tr.covered.Load(); c != nil && c.first == &lists[0][0] && c.n == total {
			return c.ok
		}
	}
	found := make([]uint64, (len(tr.items)+63)/64)
	n := 0
	for _, keys := range lists {
		for _, k := range keys {
			if i, ok := tr.changed[k]; ok && found[i/64]&(1<<(i%64)) == 0 {
				found[i/64] |= 1 << (i % 64)
				n++
			}
		}
	}
	ok := n == len(tr.items)
	if len(lists) == 1 {
		tr.covered.Store(&coverage{first: &lists[0][0], n: total, ok: ok})
	}
	return ok
}

// sharedWork returns the work of a stream whose list is shared (l.shared)
// and in scope whole (every key named, or the stream a wildcard), when that
// work is to send exactly what changed since the list's snapshot: the
// transition's items, computed once for all such streams. Check by check,
// evaluate would come to the same upserts (in another order) and nothing
// else: with the same names, a key of the list is in scope, held, not to be
// resent and not dropped, so it is upserted if and only if its version
// changed; a key not in the list is an alias, which is out of scope. That
// holds if the stream re-evaluates every key, or if its changed keys cover
// every change. ok is false in any other case.
func (l *keyList) sharedWork(snap *cache.Snapshot, t *resource.Type, wildcard, reeval bool, dirty [][]string) (w work, ok bool) {
	c := l.shared
	if c == nil || c.flags&fHas == 0 || l.nResend > 0 || l.nDropped > 0 || (!wildcard && c.flags&fNamed == 0) || (!reeval && len(dirty) == 0) {
		return work{}, false
	}
	tr := transitionOf(snap, t, c)
	if !tr.sameKeys || (!reeval && !tr.covers(dirty)) {
		return work{}, false
	}
	return work{upserts: tr.items}, true
}

// wholeKeys are the memo keys of allItems, by type order (used by
// address, as canonicalKeys).
var wholeKeys [resource.NumTypes]struct{ order int }

// allItems returns an upsert of every resource of t in snap, in its order:
// made once per snapshot, shared by every stream sent them all, so read
// only, and full (an append copies).
func allItems(snap *cache.Snapshot, t *resource.Type) []item {
	return snap.Memo(&wholeKeys[t.Order], func() any {
		rs := snap.Resources(t)
		items := make([]item, len(rs))
		for i, r := range rs {
			items[i] = item{key: r.Name, res: r}
		}
		return items
	}).([]item)
}

// wholeWork returns the work of a stream that is to be sent every resource
// of the type and holds none of them: a wildcard that names nothing, or a
// stream that names exactly the type's resources (a new stream's first
// evaluation, typically, which adoptWhole then makes share the canonical
// list). Key by key, evaluate would upsert every resource (in scope, not
// held) and change nothing. ok is false in any other case, and when there
// are fewer resources than are worth sharing.
func (l *keyList) wholeWork(snap *cache.Snapshot, t *resource.Type, wildcard, reeval bool) (w work, ok bool) {
	rs := snap.Resources(t)
	if !reeval || (l.shared != nil && l.shared.flags&fHas != 0) || l.nHeld > 0 || l.nDropped > 0 || len(rs) == 0 || len(rs) < minShared ||
		(len(l.keys) == 0 && !wildcard) || (len(l.keys) != 0 && len(l.keys) != len(rs)) {
		return work{}, false
	}
	for i := range l.keys {
		if e := &l.keys[i]; e.key != rs[i].Name || e.flags&^fResend != fNamed {
			return work{}, false
		}
	}
	return work{upserts: allItems(snap, t)}, true
}

// advance moves a shared list to snap's canonical list of t if sending
// upserts brings it exactly there (they are exactly what changed), without
// copying it. It reports whether it did; if not, the list is unchanged.
func (l *keyList) advance(snap *cache.Snapshot, t *resource.Type, upserts []item) bool {
	if l.shared == nil || l.shared.flags&fHas == 0 || len(upserts) == 0 {
		return false
	}
	tr := transitionOf(snap, t, l.shared)
	if !tr.sameKeys || len(tr.items) != len(upserts) {
		return false
	}
	if &upserts[0] != &tr.items[0] { // not sharedWork's
		for _, it := range upserts {
			if it.alias || it.res == nil || tr.changedTo(it.key) != it.res {
				return false
			}
		}
	}
	c := canonicalOf(snap, t, l.shared.flags)
	l.keys, l.shared, l.xor, l.ttls = c.keys, c, c.xor, c.ttls
	return true
}

// adoptWhole makes the list snap's canonical list of t, without building a
// list of its own first, when upserts carry every resource of the type (a
// stream's first response) and the list has either no keys (a wildcard) or
// exactly the type's names, all subscribed and none dropped. It reports
// whether it did; if not, the list is unchanged.
func (l *keyList) adoptWhole(snap *cache.Snapshot, t *resource.Type, upserts []item) bool {
	rs := snap.Resources(t)
	if len(rs) < minShared || len(upserts) != len(rs) || l.nDropped > 0 || (len(l.keys) != 0 && len(l.keys) != len(rs)) {
		return false
	}
	for _, it := range upserts {
		if it.alias || it.res == nil {
			return false
		}
	}
	// upserts hold distinct keys resolved in snap: with as many as snap has,
	// they are all of its resources.
	flags := fHas
	for i := range l.keys {
		if e := &l.keys[i]; e.key != rs[i].Name || e.flags&^(fResend|fHas) != fNamed {
			return false
		}
		flags = fNamed | fHas
	}
	c := canonicalOf(snap, t, flags)
	l.keys, l.shared, l.xor, l.ttls = c.keys, c, c.xor, c.ttls
	l.nHeld, l.nResend, l.slack = len(c.keys), 0, false
	return true
}

// adoptNamed makes an empty list snap's canonical list of t whose entries
// carry flags (fNamed, and fResend for SotW) and hold nothing, when names
// are exactly the names of snap's resources of t, in any order, each once:
// a new stream's first subscription to every resource of a type (an
// Envoy's to the endpoints of every cluster it was sent) then shares one
// list with every such stream until its first response moves it to the
// held list (adoptWhole), rather than sorting a copy of the names and
// building 32 bytes per name of its own. It reports whether it did; if
// not, the list is unchanged.
func (l *keyList) adoptNamed(snap *cache.Snapshot, t *resource.Type, names []string, flags uint8) bool {
	if snap == nil || len(names) < minShared || len(l.keys) != 0 || l.shared != nil || l.nHeld != 0 || l.nDropped != 0 || l.nResend != 0 {
		return false
	}
	rs := snap.Resources(t)
	if len(rs) != len(names) || !sameNames(rs, names) {
		return false
	}
	c := canonicalOf(snap, t, flags)
	l.keys, l.shared = c.keys, c
	if flags&fResend != 0 {
		l.nResend = len(c.keys)
	}
	return true
}

// sameNames reports whether names, as many as rs, name each of rs (sorted
// by name) once, and none is the wildcard.
func sameNames(rs []*resource.Resource, names []string) bool {
	inOrder := true
	for i, n := range names {
		if n == wildcardName {
			return false
		}
		inOrder = inOrder && n == rs[i].Name
	}
	if inOrder {
		return true
	}
	seen := make([]uint64, (len(rs)+63)/64)
	for _, n := range names {
		i, ok := slices.BinarySearchFunc(rs, n, func(r *resource.Resource, n string) int { return strings.Compare(r.Name, n) })
		if !ok || seen[i/64]&(1<<(i%64)) != 0 {
			return false // not a resource, or named twice (and so another is missing)
		}
		seen[i/64] |= 1 << (i % 64)
	}
	return true
}
