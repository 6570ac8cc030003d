package server

import (
	"iter"
	"slices"
	"strings"

	"github.com/xdsd/xdsd/resource"
)

// keyEntry is one subscription key of a type on a stream (a resource name, or
// an alias for VHDS) and what the client holds under it.
type keyEntry struct {
	key   string
	res   *resource.Resource // held (fHas) or maybe held (fDropped)
	flags uint8
}

// Entry flags. An keyEntry with none is removed.
const (
	fNamed   uint8 = 1 << iota // explicitly subscribed
	fHas                       // the client holds res (nil res: we told it the key does not exist, D5)
	fDropped                   // unsubscribed, the client may still hold res: SotW Listener/Cluster until the next full-state response, delta until the response in flight is answered
	fResend                    // newly subscribed: sent even if held at the current version (S10, D8)
)

// keyList is a type's entries on one stream, sorted by key: one slice
// rather than a map per aspect keeps a stream's memory near 32 bytes per
// key, and a key that names a held resource shares the resource's copy of
// the name. It keeps the counts and the set hash of what is held.
type keyList struct {
	keys     []keyEntry
	nHeld    int    // entries with fHas
	nDropped int    // entries with fDropped
	nResend  int    // entries with fResend
	xor      uint64 // XOR of the hashes of held resources: the set version
	ttls     int    // number of held resources with a TTL
	// slack says an entry may have lost its last flag since the last compact.
	slack bool
	// shared, when set, is the canonical list keys is (see share), which
	// other streams read too: own copies it before any change, and every
	// method that changes an entry must be given one of an owned list.
	shared *canonical
}

// own makes the list the stream's own, ready to be changed.
func (l *keyList) own() {
	if l.shared != nil {
		l.keys = slices.Clone(l.keys)
		l.shared = nil
	}
}

// index returns the position of key's entry, or -1.
func (l *keyList) index(key string) int {
	if i, ok := slices.BinarySearchFunc(l.keys, key, compareKey); ok {
		return i
	}
	return -1
}

// mutable returns entry i, owning the list first.
func (l *keyList) mutable(i int) *keyEntry {
	l.own()
	return &l.keys[i]
}

func compareKey(e keyEntry, key string) int { return strings.Compare(e.key, key) }

// lookup returns key's keyEntry, or nil. The pointer is valid until the list
// next gains or loses entries (mergeKeys, compact).
func (l *keyList) lookup(key string) *keyEntry {
	if i, ok := slices.BinarySearchFunc(l.keys, key, compareKey); ok {
		return &l.keys[i]
	}
	return nil
}

// heldAt returns what the client holds under key, and whether it holds
// anything (a nil resource: told it does not exist).
func (l *keyList) heldAt(key string) (*resource.Resource, bool) {
	if e := l.lookup(key); e != nil && e.flags&fHas != 0 {
		return e.res, true
	}
	return nil, false
}

// mayHoldAt returns what the client holds, or may still hold (fDropped),
// under key; nil if nothing, or if it was told the key does not exist.
func (l *keyList) mayHoldAt(key string) *resource.Resource {
	if e := l.lookup(key); e != nil && e.flags&(fHas|fDropped) != 0 {
		return e.res
	}
	return nil
}

// held yields every key the client holds and its resource (nil: told it
// does not exist).
func (l *keyList) held() iter.Seq2[string, *resource.Resource] {
	return func(yield func(string, *resource.Resource) bool) {
		for i := range l.keys {
			if e := &l.keys[i]; e.flags&fHas != 0 && !yield(e.key, e.res) {
				return
			}
		}
	}
}

// mergeKeys calls f on the keyEntry of each of keys (sorted, without
// duplicates), adding the missing ones, in one pass.
func (l *keyList) mergeKeys(keys []string, f func(i int, e *keyEntry)) {
	missing, j := 0, 0
	for _, k := range keys {
		for j < len(l.keys) && l.keys[j].key < k {
			j++
		}
		if j == len(l.keys) || l.keys[j].key != k {
			missing++
		}
	}
	if missing == 0 {
		l.own() // changed in place
	}
	old := l.keys
	if missing > 0 {
		l.keys = make([]keyEntry, 0, len(old)+missing) // a new list: the old one may be shared
		l.shared = nil
	}
	j = 0
	for i, k := range keys {
		for j < len(old) && old[j].key < k {
			if missing > 0 {
				l.keys = append(l.keys, old[j])
			}
			j++
		}
		switch {
		case j < len(old) && old[j].key == k:
			if missing > 0 {
				l.keys = append(l.keys, old[j])
				f(i, &l.keys[len(l.keys)-1])
			} else {
				f(i, &old[j])
			}
			j++
		default:
			l.keys = append(l.keys, keyEntry{key: k})
			f(i, &l.keys[len(l.keys)-1])
		}
	}
	if missing > 0 {
		l.keys = append(l.keys, old[j:]...)
	}
}

// compact removes the entries left without flags, and gives memory back
// when most of the list is gone.
func (l *keyList) compact() {
	if !l.slack {
		return
	}
	l.slack = false
	l.keys = slices.DeleteFunc(l.keys, func(e keyEntry) bool { return e.flags == 0 })
	if cap(l.keys) > 64 && cap(l.keys) > 4*len(l.keys) {
		l.keys = slices.Clone(l.keys)
	}
}

// hold records that the client now holds r (nil: told it does not exist)
// under e's key.
func (l *keyList) hold(e *keyEntry, r *resource.Resource) {
	if e.flags&fHas != 0 {
		l.count(e.res, -1)
	} else {
		l.nHeld++
	}
	if e.flags&fDropped != 0 {
		e.flags &^= fDropped
		l.nDropped--
	}
	e.res = r
	e.flags |= fHas
	l.count(r, 1)
	if r != nil && e.key == r.Name {
		e.key = r.Name // share the resource's copy of the name
	}
}

// forget records that the client no longer holds anything under e's key.
func (l *keyList) forget(e *keyEntry) {
	if e.flags&fHas == 0 {
		return
	}
	l.count(e.res, -1)
	l.nHeld--
	e.flags &^= fHas
	e.res = nil
	l.slack = true
}

// drop records that the client may still hold what it held under e's key
// although it no longer subscribes to it.
func (l *keyList) drop(e *keyEntry) {
	r := e.res
	l.forget(e)
	if r != nil {
		e.res = r
		e.flags |= fDropped
		l.nDropped++
	}
}

// release forgets e's resource, held or dropped.
func (l *keyList) release(e *keyEntry) {
	l.forget(e)
	if e.flags&fDropped != 0 {
		e.flags &^= fDropped
		e.res = nil
		l.nDropped--
		l.slack = true
	}
}

// resendDropped marks every dropped keyEntry to be sent again, and reports
// whether there was one.
func (l *keyList) resendDropped() bool {
	found := false
	for i := 0; l.nDropped > 0 && i < len(l.keys); i++ {
		if e := &l.keys[i]; e.flags&fDropped != 0 {
			l.setResend(e)
			found = true
		}
	}
	return found
}

// clearDropped forgets every dropped keyEntry.
func (l *keyList) clearDropped() {
	for i := 0; l.nDropped > 0 && i < len(l.keys); i++ {
		if e := &l.keys[i]; e.flags&fDropped != 0 {
			l.release(e)
		}
	}
}

// setResend marks e to be sent again.
func (l *keyList) setResend(e *keyEntry) {
	if e.flags&fResend == 0 {
		e.flags |= fResend
		l.nResend++
	}
}

// clearResend unmarks e.
func (l *keyList) clearResend(e *keyEntry) {
	if e.flags&fResend != 0 {
		e.flags &^= fResend
		l.nResend--
		l.slack = true
	}
}

// clearAllResend unmarks every keyEntry.
func (l *keyList) clearAllResend() {
	for i := 0; l.nResend > 0 && i < len(l.keys); i++ {
		l.clearResend(&l.keys[i])
	}
}

func (l *keyList) count(r *resource.Resource, sign int) {
	if r == nil {
		return
	}
	l.xor ^= r.Hash()
	if r.TTL > 0 {
		l.ttls += sign
	}
}

// unname records that e's key is no longer explicitly subscribed.
func (l *keyList) unname(e *keyEntry) {
	e.flags &^= fNamed
	l.slack = true
}
