package server

import (
	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// A fleet of Envoys typically holds, on every stream, every cluster (a
// wildcard) and the endpoints of every cluster: the same list of keys at the
// same versions. Such streams share one list per snapshot, type and flags
// instead of keeping a copy each (32 bytes per key per stream), and move to
// the next snapshot's list when they are sent its changes.

// canonical is a snapshot's resources of one type as a key list whose
// entries all hold their resource with the same flags.
type canonical struct {
	keys  []keyEntry
	xor   uint64
	ttls  int
	rs    []*resource.Resource // the snapshot's, which keys mirrors
	flags uint8
}

type canonicalKey struct {
	t     *resource.Type
	flags uint8
}

// canonicalOf returns snap's canonical list of t with flags, made once per
// snapshot.
func canonicalOf(snap *cache.Snapshot, t *resource.Type, flags uint8) *canonical {
	return snap.Memo(canonicalKey{t, flags}, func() any {
		rs := snap.Sorted(t)
		c := &canonical{keys: make([]keyEntry, len(rs)), rs: rs, flags: flags}
		for i, r := range rs {
			c.keys[i] = keyEntry{key: r.Name, res: r, flags: flags}
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
	if l.shared != nil || len(l.keys) < minShared || l.nResend > 0 || l.nDropped > 0 {
		return
	}
	rs := snap.Sorted(t)
	if len(rs) != len(l.keys) {
		return
	}
	flags := l.keys[0].flags
	if flags&fHas == 0 {
		return
	}
	for i := range l.keys {
		if e := &l.keys[i]; e.flags != flags || e.res != rs[i] || e.key != rs[i].Name {
			return
		}
	}
	c := canonicalOf(snap, t, flags)
	l.keys, l.shared = c.keys, c
}

// advance moves a shared list to snap's canonical list of t if sending
// upserts brings it exactly there, without copying it. It reports whether
// it did; if not, the list is unchanged.
func (l *keyList) advance(snap *cache.Snapshot, t *resource.Type, upserts []item) bool {
	if l.shared == nil || len(upserts) == 0 {
		return false
	}
	rs := snap.Sorted(t)
	if len(rs) != len(l.keys) {
		return false
	}
	for _, it := range upserts {
		if it.res == nil || it.alias {
			return false
		}
	}
	// What the client holds under key once upserts are sent.
	next := func(e *keyEntry) (*resource.Resource, bool) {
		if len(upserts) == 1 {
			if upserts[0].key == e.key {
				return upserts[0].res, true
			}
			return e.res, false
		}
		return nil, false // replaced below for larger sets
	}
	if len(upserts) > 1 {
		up := make(map[string]*resource.Resource, len(upserts))
		for _, it := range upserts {
			up[it.key] = it.res
		}
		next = func(e *keyEntry) (*resource.Resource, bool) {
			if r, ok := up[e.key]; ok {
				return r, true
			}
			return e.res, false
		}
	}
	matched := 0
	for i := range l.keys {
		e := &l.keys[i]
		want, upserted := next(e)
		if upserted {
			matched++
		}
		if want != rs[i] || e.key != rs[i].Name {
			return false
		}
	}
	if matched != len(upserts) {
		return false
	}
	c := canonicalOf(snap, t, l.keys[0].flags)
	l.keys, l.shared, l.xor, l.ttls = c.keys, c, c.xor, c.ttls
	return true
}
