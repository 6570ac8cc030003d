package client

import (
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"
)

// typeState is the protocol state of one type on a stream. Owned by the
// stream's goroutine.
type typeState struct {
	info     *typeInfo
	wildcard map[*watch]bool      // "*" watches
	res      map[string]*resState // watched by name, or received under a wildcard

	// SotW.
	version   string   // last accepted version_info; kept across streams (C5)
	nonce     string   // latest response nonce on the current stream
	sentNames []string // names of the latest request on the current stream; nil: none sent
	// onlyWildcard: every request of the current stream named nothing
	// but "*" (Config.LegacyWildcard).
	onlyWildcard bool
	// lost holds the names dropped by the client itself (TTL expiry,
	// dependent deletion) and not received since: while any is, the
	// client no longer holds version, and resumes with no version.
	lost map[string]bool

	// dropped holds the dependents dropped with the Listener or Cluster
	// that referred to them (C3) and not referred to again since: they
	// are left out of the subscription, and responses that still carry
	// them are ignored.
	dropped map[string]bool
	// resub holds the names to request again although the subscription
	// may not have changed: dependents referred to again, which the
	// server may believe the client still holds.
	resub map[string]bool
	// collect: a watch was removed; what no watch covers any more is
	// forgotten after the current batch of events.
	collect bool

	// Delta.
	sentSet map[string]bool // names subscribed on the current stream, "*" included
}

// resState is one resource name of a type. Owned by the stream's goroutine.
type resState struct {
	watchers map[*watch]bool
	update   *Update // last accepted; nil if none or deleted
	raw      []byte  // encoded body of update, to tell unchanged resends
	notExist bool    // reported as not existing and not received since

	expiry    *time.Timer // C4, running while a request names it and it has not arrived
	expiryGen int
	ttl       *time.Timer // C6, running while update has a TTL
	ttlGen    int
}

func newTypeState(ti *typeInfo) *typeState {
	return &typeState{
		info:         ti,
		wildcard:     make(map[*watch]bool),
		res:          make(map[string]*resState),
		lost:         make(map[string]bool),
		dropped:      make(map[string]bool),
		resub:        make(map[string]bool),
		onlyWildcard: true,
	}
}

// resetConn forgets what was sent on the stream that ended. The next
// stream's first request asks for every name anew, so nothing is left to
// request again.
func (ts *typeState) resetConn() {
	ts.nonce, ts.sentNames, ts.sentSet = "", nil, nil
	ts.onlyWildcard = true
	clear(ts.resub)
}

// names returns the names the type subscribes to, sorted, "*" included.
func (ts *typeState) names() []string {
	out := []string{}
	if len(ts.wildcard) > 0 {
		out = append(out, "*")
	}
	for n, rs := range ts.res {
		if len(rs.watchers) > 0 && !ts.dropped[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// subscriptionChanged says whether the type's subscription must be sent:
// its names changed, or some must be requested again.
func (ts *typeState) subscriptionChanged(delta bool) bool {
	if len(ts.resub) > 0 {
		return true
	}
	names := ts.names()
	if delta {
		if len(names) != len(ts.sentSet) {
			return true
		}
		for _, n := range names {
			if !ts.sentSet[n] {
				return true
			}
		}
		return false
	}
	if ts.sentNames == nil {
		return len(names) > 0
	}
	return !slices.Equal(names, ts.sentNames)
}

// wants says whether a received resource is kept: it is watched by name or
// the type is watched by wildcard, and it was not dropped with what
// referred to it (C3).
func (ts *typeState) wants(name string) bool {
	if ts.dropped[name] {
		return false
	}
	if len(ts.wildcard) > 0 {
		return true
	}
	rs := ts.res[name]
	return rs != nil && len(rs.watchers) > 0
}

func (ts *typeState) allWatchers() []*watch {
	var out []*watch
	for w := range ts.wildcard {
		out = append(out, w)
	}
	for _, rs := range ts.res {
		for w := range rs.watchers {
			out = append(out, w)
		}
	}
	return out
}

// watchersOf returns the watchers of name: by name and by wildcard.
func (ts *typeState) watchersOf(name string) []*watch {
	var out []*watch
	if rs := ts.res[name]; rs != nil {
		for w := range rs.watchers {
			out = append(out, w)
		}
	}
	for w := range ts.wildcard {
		out = append(out, w)
	}
	return out
}

func (rs *resState) stopExpiry() {
	if rs.expiry != nil {
		rs.expiry.Stop()
		rs.expiry = nil
	}
	rs.expiryGen++
}

func (rs *resState) stopTTL() {
	if rs.ttl != nil {
		rs.ttl.Stop()
		rs.ttl = nil
	}
	rs.ttlGen++
}

// addWatch registers w and tells it what the stream already knows.
func (s *stream) addWatch(ti *typeInfo, w *watch) {
	ts := s.types[ti.url]
	if ts == nil {
		ts = newTypeState(ti)
		s.types[ti.url] = ts
	}
	if w.name == "*" {
		ts.wildcard[w] = true
		for _, rs := range ts.res {
			if rs.update != nil {
				w.update(*rs.update)
			}
		}
		return
	}
	rs := ts.res[w.name]
	if rs == nil {
		rs = &resState{}
		ts.res[w.name] = rs
	}
	if rs.watchers == nil {
		rs.watchers = make(map[*watch]bool)
	}
	rs.watchers[w] = true
	if ts.dropped[w.name] {
		rs.notExist = true // not asked for until referred to again (C3)
	}
	switch {
	case rs.update != nil:
		w.update(*rs.update)
	case rs.notExist:
		w.doesNotExist(w.name)
	}
}

// removeWatch unregisters w. What no watch covers any more is forgotten
// after the batch of events (collect): a watch that replaces w in the same
// batch is told the state at once, as the server will not send it again.
func (s *stream) removeWatch(w *watch) {
	ts := s.types[w.typeURL]
	if ts == nil {
		return
	}
	ts.collect = true
	if w.name == "*" {
		delete(ts.wildcard, w)
		return
	}
	if rs := ts.res[w.name]; rs != nil {
		delete(rs.watchers, w)
	}
}

// collect forgets, for every type a watch was removed from, the names no
// watch covers any more. It runs after a batch of events, before the
// subscriptions are sent.
func (s *stream) collect() {
	for _, ts := range s.types {
		if !ts.collect {
			continue
		}
		ts.collect = false
		for n, rs := range ts.res {
			if len(rs.watchers) == 0 && (len(ts.wildcard) == 0 || rs.update == nil) {
				s.forget(ts, n, rs)
			}
		}
		if len(ts.wildcard) == 0 {
			for n := range ts.dropped {
				if ts.res[n] == nil {
					delete(ts.dropped, n)
				}
			}
		}
	}
}

func (s *stream) forget(ts *typeState, name string, rs *resState) {
	rs.stopExpiry()
	rs.stopTTL()
	delete(ts.res, name)
	delete(ts.lost, name)
	delete(ts.resub, name)
}

// startExpiry starts the watch expiry timer (C4) of every watched name that
// has not arrived, once a request naming it has been sent.
func (s *stream) startExpiry(ts *typeState) {
	if s.conn == nil {
		return
	}
	for name, rs := range ts.res {
		if len(rs.watchers) == 0 || rs.update != nil || rs.notExist || rs.expiry != nil || ts.dropped[name] {
			continue
		}
		rs.expiryGen++
		gen := rs.expiryGen
		rs.expiry = time.AfterFunc(s.c.cfg.WatchExpiry, func() {
			s.post(func() { s.expired(ts, name, rs, gen) })
		})
	}
}

func (s *stream) expired(ts *typeState, name string, rs *resState, gen int) {
	if ts.res[name] != rs || rs.expiryGen != gen {
		return
	}
	rs.expiry = nil
	if rs.update != nil || rs.notExist {
		return
	}
	rs.notExist = true
	for w := range rs.watchers {
		w.doesNotExist(name)
	}
}

// accepted is one resource of an accepted response.
type accepted struct {
	name    string
	version string
	msg     proto.Message // nil: a heartbeat (or, in delta, "does not exist")
	raw     []byte
	ttl     time.Duration
}

// apply stores an accepted resource and tells its watchers if it changed.
func (s *stream) apply(ts *typeState, a accepted) {
	rs := ts.res[a.name]
	if a.msg == nil { // heartbeat: refresh the TTL (C6)
		if rs != nil && rs.update != nil {
			rs.update.TTL = a.ttl
			s.armTTL(ts, a.name, rs)
		}
		return
	}
	if !ts.wants(a.name) {
		return
	}
	if rs == nil {
		rs = &resState{}
		ts.res[a.name] = rs
	}
	rs.stopExpiry()
	delete(ts.lost, a.name)
	changed := rs.update == nil || !slices.Equal(rs.raw, a.raw)
	rs.update = &Update{TypeURL: ts.info.url, Name: a.name, Version: a.version, Message: a.msg, TTL: a.ttl}
	rs.raw = a.raw
	rs.notExist = false
	s.armTTL(ts, a.name, rs)
	if changed {
		for _, w := range ts.watchersOf(a.name) {
			w.update(*rs.update)
		}
		if ts.info.fullState {
			s.referDependents(a.msg)
		}
	}
}

func (s *stream) armTTL(ts *typeState, name string, rs *resState) {
	rs.stopTTL()
	if rs.update == nil || rs.update.TTL <= 0 {
		return
	}
	gen := rs.ttlGen
	rs.ttl = time.AfterFunc(rs.update.TTL, func() {
		s.post(func() {
			if ts.res[name] == rs && rs.ttlGen == gen {
				rs.ttl = nil
				s.remove(ts, []string{name}, true)
			}
		})
	})
}

// remove deletes resources (server deletion, C3; TTL expiry, C6), tells
// their watchers, and drops the resources that only they referred to.
// local says the client deletes them itself, not the server.
func (s *stream) remove(ts *typeState, names []string, local bool) {
	var gone []proto.Message
	for _, name := range names {
		rs := ts.res[name]
		if rs == nil || rs.notExist {
			continue
		}
		if rs.update != nil {
			gone = append(gone, rs.update.Message)
		}
		for _, w := range ts.watchersOf(name) {
			w.doesNotExist(name)
		}
		rs.update, rs.raw, rs.notExist = nil, nil, true
		if local {
			ts.lost[name] = true
		}
		rs.stopExpiry()
		rs.stopTTL()
		if len(rs.watchers) == 0 {
			delete(ts.res, name)
			delete(ts.lost, name)
		}
	}
	s.dropDependents(ts, gone)
}

// dropDependents drops the routes or endpoints of deleted Listeners or
// Clusters that no remaining one of them refers to (C3).
func (s *stream) dropDependents(ts *typeState, gone []proto.Message) {
	if len(gone) == 0 || !ts.info.fullState {
		return
	}
	drop := map[string]map[string]bool{}
	for _, m := range gone {
		t, names := dependents(m)
		for _, n := range names {
			if drop[t] == nil {
				drop[t] = map[string]bool{}
			}
			drop[t][n] = true
		}
	}
	for _, rs := range ts.res {
		if rs.update == nil {
			continue
		}
		t, names := dependents(rs.update.Message)
		for _, n := range names {
			delete(drop[t], n)
		}
	}
	for t, set := range drop {
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) > 0 {
			s.onStreamOf(t, func(target *stream) { target.dropNames(t, names) })
		}
	}
}

// referDependents takes back the dependents of m, a new or changed
// Listener or Cluster, that were dropped with an earlier one (C3): they
// are requested again.
func (s *stream) referDependents(m proto.Message) {
	t, names := dependents(m)
	if len(names) > 0 {
		s.onStreamOf(t, func(target *stream) { target.undrop(t, names) })
	}
}

// onStreamOf runs f with the stream that carries type t: at once if it is
// s, else posted to it. Nothing runs if no stream carries t.
func (s *stream) onStreamOf(t string, f func(target *stream)) {
	switch target := s.c.streamOf(t); {
	case target == nil:
	case target == s:
		f(s)
	default:
		target.post(func() { f(target) })
	}
}

// dropNames drops the resources of type t, held or awaited, because what
// referred to them is gone (C3): their watchers are told they do not
// exist, they leave the subscription, and responses still carrying them
// are ignored, until a Listener or Cluster refers to them again (undrop).
func (s *stream) dropNames(t string, names []string) {
	ts := s.types[t]
	if ts == nil {
		return
	}
	var held []string
	for _, n := range names {
		rs := ts.res[n]
		watched := rs != nil && len(rs.watchers) > 0
		if !watched && len(ts.wildcard) == 0 {
			continue
		}
		ts.dropped[n] = true
		delete(ts.resub, n)
		switch {
		case rs == nil:
		case rs.update != nil:
			held = append(held, n)
		case !rs.notExist && watched:
			rs.stopExpiry()
			rs.notExist = true
			for w := range rs.watchers {
				w.doesNotExist(n)
			}
		}
	}
	s.remove(ts, held, true)
}

// undrop takes back the dropped resources of type t among names, which a
// Listener or Cluster refers to again: they are requested again, since
// the server may believe the client still holds them.
func (s *stream) undrop(t string, names []string) {
	ts := s.types[t]
	if ts == nil {
		return
	}
	for _, n := range names {
		if ts.dropped[n] {
			delete(ts.dropped, n)
			ts.resub[n] = true
		}
	}
}
