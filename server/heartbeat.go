package server

import (
	"sort"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/resource"
)

// minHeartbeat bounds how often heartbeats go out, whatever the TTLs.
const minHeartbeat = 50 * time.Millisecond

// heartbeat keeps a stream's TTL resources alive (PROTOCOL L1, L2): every
// half of the shortest TTL the client holds, each type that holds TTL
// resources and has no response in flight is sent a heartbeat. In delta it
// is a Resource with the name, version and TTL but no body, which refreshes
// the TTL and is not an update (L2). In SotW the resources go again, each
// with its TTL, which refreshes it too (L1): Envoy's SotW client does not
// refresh a TTL on a bodiless heartbeat (its default mux drops heartbeats
// before it reads TTLs), and for a Listener or Cluster it takes a response
// of heartbeats for one that lists none, removing every one of them. An
// incremental client that rejects a response changing a TTL resource is
// sent a heartbeat at once, of what it kept (see accepted); so is a type
// whose real response was in flight at a slot, once it is answered
// (typeState.beatDue). Guarded by the stream's lock; the timer wakes the
// stream.
type heartbeat struct {
	timer    *time.Timer
	interval time.Duration
	next     time.Time // when heartbeats are due; zero when none are
}

// ttlOf returns the TTL the client sees for r on this stream: SotW clients
// see TTLs only if they accept Resource wrappers (L3).
func (st *stream) ttlOf(r *resource.Resource) time.Duration {
	if r == nil || (!st.delta && !st.wrapTTL) {
		return 0
	}
	return r.TTL
}

// rearmHeartbeat starts, changes or stops the heartbeat timer after a push.
func (st *stream) rearmHeartbeat() {
	var shortest time.Duration
	for _, ts := range st.types.list {
		if ts.ttls == 0 && ts.acc == nil {
			continue
		}
		ts.eachClientHeld(func(_ string, r *resource.Resource) {
			if d := st.ttlOf(r); d > 0 && (shortest == 0 || d < shortest) {
				shortest = d
			}
		})
	}
	hb := &st.hb
	if shortest == 0 {
		hb.stop()
		return
	}
	interval := max(shortest/2, minHeartbeat)
	if hb.timer != nil && hb.interval == interval {
		return
	}
	hb.stop()
	hb.interval = interval
	hb.next = time.Now().Add(interval)
	hb.timer = time.AfterFunc(interval, st.waker.wake)
}

func (hb *heartbeat) stop() {
	if hb.timer != nil {
		hb.timer.Stop()
		hb.timer = nil
	}
	hb.next = time.Time{}
}

// sendDueBeats sends the heartbeat of each type that is due one of its
// own (beatDue) and has no response in flight. It runs after push, so that
// a real update goes first, but only once: a type that was sent one while
// its heartbeat was due (beatDeferred, set by send) gets its heartbeat
// before the next push (deferred true), however fast updates follow.
func (st *stream) sendDueBeats(deferred bool) error {
	for _, ts := range st.types.list {
		if !ts.beatDue || ts.waiting || (deferred && !ts.beatDeferred) {
			continue
		}
		ts.beatDue, ts.beatDeferred = false, false
		if err := st.beat(ts); err != nil {
			return err
		}
	}
	return nil
}

// due reports whether heartbeats are due at now.
func (hb *heartbeat) due(now time.Time) bool {
	return !hb.next.IsZero() && !now.Before(hb.next)
}

// sendHeartbeats sends a heartbeat for every type that holds TTL
// resources. A type with a response in flight gets none now, nor a whole
// interval later, which would leave what the client holds to expire: its
// heartbeat is due once the response is answered (beatDue), unless that
// response is a heartbeat itself.
func (st *stream) sendHeartbeats() error {
	st.hb.stop()
	for _, t := range st.order() {
		ts := st.types.get(t)
		if ts == nil {
			continue
		}
		if ts.waiting {
			ts.beatDue = ts.beatDue || (!ts.beating && (ts.ttls > 0 || ts.acc != nil))
			continue
		}
		ts.beatDue, ts.beatDeferred = false, false
		if err := st.beat(ts); err != nil {
			return err
		}
	}
	st.rearmHeartbeat()
	return nil
}

// beat sends ts a heartbeat of the TTL resources the client holds, if any.
func (st *stream) beat(ts *typeState) error {
	var keys []string
	ts.eachClientHeld(func(k string, r *resource.Resource) {
		if st.ttlOf(r) > 0 {
			keys = append(keys, k)
		}
	})
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	return st.sendHeartbeat(ts, keys)
}

// sendHeartbeat sends ts the heartbeat of keys, which hold TTL resources
// (in SotW, for a full-state type, of every key the client holds).
func (st *stream) sendHeartbeat(ts *typeState, keys []string) error {
	keys = oncePerResource(ts, keys)
	nonce := st.srv.nextNonce()
	st.await(ts, nonce)
	ts.beating = true
	st.status.sent(ts.t, ts.lastVersion, nonce)
	st.srv.metrics.responses.Add(1)
	if st.delta {
		resp := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: ts.lastVersion, TypeUrl: ts.t.URL, Nonce: nonce,
			ControlPlane: st.srv.controlPlane.Load().message()}
		for _, k := range keys {
			r := ts.clientHeldAt(k)
			resp.Resources = append(resp.Resources, &discovery.Resource{Name: r.Name, Version: r.Version, Ttl: durationpb.New(r.TTL)})
		}
		return st.sendDeltaResp(resp)
	}
	// SotW: the resources again, each with its TTL; a full-state type
	// lists everything the client holds.
	var bodies []*anypb.Any
	if ts.t.FullState {
		all := make([]string, 0, ts.nHeld)
		ts.eachClientHeld(func(k string, _ *resource.Resource) { all = append(all, k) })
		sort.Strings(all)
		keys = oncePerResource(ts, all)
	}
	for _, k := range keys {
		bodies = append(bodies, st.sotwBody(ts.clientHeldAt(k)))
	}
	return st.sendSotw(&discovery.DiscoveryResponse{VersionInfo: ts.lastVersion, Resources: bodies, TypeUrl: ts.t.URL, Nonce: nonce,
		ControlPlane: st.srv.controlPlane.Load().message()})
}

// oncePerResource returns keys without those under which the client holds
// a resource of the same name as under an earlier key (a virtual host held
// under its name and an alias, maybe at two versions after a NACK): a
// response names a resource once (S11).
func oncePerResource(ts *typeState, keys []string) []string {
	aliased := false
	for _, k := range keys {
		if r := ts.clientHeldAt(k); r != nil && r.Name != k {
			aliased = true
			break
		}
	}
	if !aliased {
		return keys // every key is its resource's name: none twice
	}
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if r := ts.clientHeldAt(k); r == nil || !seen[r.Name] {
			if r != nil {
				seen[r.Name] = true
			}
			out = append(out, k)
		}
	}
	return out
}
