package server

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/resource/redact"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// clientFeatureResourceInSotw is the client feature that lets SotW
// responses carry Resource wrappers (PROTOCOL L3), as the list and Envoy's
// xDS protocol page spell it.
const clientFeatureResourceInSotw = "xds.config.supports-resource-in-sotw"

// clientFeatureResourceInSotwShort is the same feature as gRPC's clients
// (Go, Java, C-core) send it, and Envoy's list of client features spells
// it.
const clientFeatureResourceInSotwShort = "xds.config.resource-in-sotw"

// clientFeatureResourceTTL is the client feature of TTLs and heartbeats.
const clientFeatureResourceTTL = "xds.config.supports-resource-ttl"

// stream is one xDS stream. Two goroutines work on it: the handler, which
// receives requests, and the waker's, which runs when a new snapshot
// arrives or a timer fires. Both do so holding mu, which guards every
// field below it. Only status is shared beyond them (it has its own lock).
type stream struct {
	srv   *Server        // read-only
	delta bool           // read-only
	only  *resource.Type // read-only: the type of a per-type service; nil for ADS
	waker waker
	// gate says whether a turn is running (busy), so that a wake-up that
	// comes meanwhile leaves its turn to the running one (pending) rather
	// than wait for it on a worker: the turn may be blocked in a send to a
	// client that gives no window or does not read. The handler's turn
	// waits for a running one on turnEnded. gate is never held across a
	// turn; a turn takes mu after it has made itself busy.
	gate      sync.Mutex
	turnEnded sync.Cond // on gate
	busy      bool      // guarded by gate
	pending   bool      // guarded by gate
	// handlerWaits is set while the handler waits for a turn to end; the
	// turn then leaves what a wake-up asked for to the handler's turn,
	// which does all a wake-up's does, so that a stream woken without end
	// still handles its requests. Guarded by gate.
	handlerWaits bool

	// ctx is the gRPC stream's context, which carries the client's peer
	// (for Config.Authorize); read-only once the stream serves.
	ctx context.Context

	mu sync.Mutex // held while handling a request or a wake-up, including sends
	// failed is the error a wake-up met; the handler ends the stream with it.
	failed error
	log    *slog.Logger // made on first use: see logger
	// node is the encoding of the first request's node (S1) without its
	// extensions, nil until then; nodeID is its id.
	node    []byte
	nodeID  string
	wrapTTL bool // client accepts Resource wrappers in SotW
	watcher *cache.Watcher
	snap    *cache.Snapshot
	// names is snap, for the reader to share the strings of the names a
	// request subscribes to (xdswire.DeltaRequest) without the lock.
	names         atomic.Pointer[cache.Snapshot]
	publishedAt   time.Time // when snap was published; zero once measured
	types         typeStates
	warm          warmGate
	hb            heartbeat
	status        *streamStatus
	sendSotw      func(*discovery.DiscoveryResponse) error
	sendDeltaResp func(*discovery.DeltaDiscoveryResponse) error
	// sendWire, when set, sends a response assembled from pre-encoded
	// parts (an *xdswire.Response) instead of a message.
	sendWire func(any) error
	// sendParts, when set, sends a response from its encoded parts (the
	// transport's own fast path).
	sendParts func([][]byte) error
	// held is set when the last push held a response back behind one not
	// yet ACKed: an ACK taken inline then wakes the stream.
	held   bool
	closed bool // close has run
	// warnedType is set once an unknown type has been logged.
	warnedType bool
	// repeated is the last repeated node that decoded (see nodeDecodesLocked).
	repeated xdswire.SeenNode
}

// serve runs the stream on the handler's goroutine: it receives requests
// and handles each in a turn. A goroutine of the waker's takes the turns
// that publications and timers call for, so that an idle stream has no
// goroutine of its own but this one, blocked in recv. A send error ends the
// gRPC stream (grpc-go writes its status), which makes recv fail.
func serve[Req any](st *stream, recv func() (Req, error), handle func(Req) error) error {
	st.waker.fn = st.wakeUp
	defer st.close()
	for {
		req, err := recv()
		if err != nil {
			if failed := st.failure(); failed != nil {
				err = failed
			} else if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		err = st.turn(func() error { return handle(req) })
		if r, ok := any(req).(interface{ Release() }); ok {
			r.Release() // the request's bytes go back to gRPC's pool
		}
		if err != nil {
			return err
		}
	}
}

// wakeUp takes a turn for a publication or a timer, or, if a turn is
// running, leaves it to that one to take another when it ends.
func (st *stream) wakeUp() {
	st.gate.Lock()
	if st.busy {
		st.pending = true
		st.gate.Unlock()
		return
	}
	st.busy = true
	st.gate.Unlock()
	st.mu.Lock()
	_ = st.turnLocked(nil) // a failure is kept in st.failed
	st.endTurn()
}

// endTurn ends a turn, whose goroutine holds mu and made the stream busy:
// it first takes the turns wake-ups asked for meanwhile.
func (st *stream) endTurn() {
	for {
		st.gate.Lock()
		if !st.pending || st.handlerWaits {
			st.busy, st.pending = false, false
			st.turnEnded.Signal() // the handler, if it waits
			st.gate.Unlock()
			st.mu.Unlock()
			return
		}
		st.pending = false
		st.gate.Unlock()
		_ = st.turnLocked(nil)
	}
}

// failure returns the error a turn met, if any.
func (st *stream) failure() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.failed
}

// turn handles one event under the stream's lock: it runs handle (if any),
// adopts a new snapshot, opens the warm gate if it timed out, sends
// heartbeats that are due, then pushes what the state calls for. An error
// fails the stream for good.
func (st *stream) turn(handle func() error) error {
	st.gate.Lock()
	for st.busy {
		st.handlerWaits = true
		st.turnEnded.Wait()
	}
	st.busy, st.handlerWaits = true, false
	st.gate.Unlock()
	st.mu.Lock()
	err := st.turnLocked(handle)
	st.endTurn()
	return err
}

// turnLocked is turn's work; st.mu is held.
func (st *stream) turnLocked(handle func() error) error {
	if st.failed != nil {
		return st.failed
	}
	if st.closed { // nothing is sent, or awaited, after close
		return nil
	}
	err := st.step(handle)
	if err != nil {
		st.failed = err
	}
	return err
}

func (st *stream) step(handle func() error) error {
	if handle != nil {
		if err := handle(); err != nil {
			if !isRefusal(err) { // logged, at a bounded rate, as it was refused
				st.logger().Warn("closing stream", "error", err)
			}
			return err
		}
	}
	if st.watcher != nil && st.watcher.HasNews() {
		st.takeSnapshot()
	}
	now := time.Now()
	if st.warm.due(now) {
		st.warm.clear()
	}
	if st.hb.due(now) {
		if err := st.sendHeartbeats(); err != nil {
			return st.sendFailed(err)
		}
	}
	if err := st.sendDueBeats(true); err != nil {
		return st.sendFailed(err)
	}
	if err := st.push(); err != nil {
		return st.sendFailed(err)
	}
	if err := st.sendDueBeats(false); err != nil {
		return st.sendFailed(err)
	}
	st.publishedAt = time.Time{} // later responses answer requests, not the publication
	st.rearmHeartbeat()
	return nil
}

// sendFailed logs a failed send, which most often means the client has
// gone, and returns err.
func (st *stream) sendFailed(err error) error {
	st.logger().Debug("stream ends: a send failed", "error", err)
	return err
}

// takeSnapshot adopts the watcher's latest snapshot and marks what changed.
func (st *stream) takeSnapshot() {
	snap, pending, at := st.watcher.Take()
	st.snap, st.publishedAt = snap, at
	st.names.Store(snap)
	for _, ts := range st.types.list {
		if pending.All {
			ts.reeval = true
			continue
		}
		for _, ch := range pending.Changes {
			ts.markDirty(ch[ts.t])
		}
	}
}

// close ends the stream: it stops the waker first (waiting for a turn in
// progress), then the timers and the watch.
func (st *stream) close() {
	st.waker.close()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	for _, ts := range st.types.list {
		st.stopWaiting(ts)
	}
	st.warm.clear()
	st.hb.stop()
	if st.watcher != nil {
		st.watcher.Close()
	}
	st.srv.status.remove(st.status)
	st.srv.workers.detach()
}

// setPeer records ctx, the gRPC stream's context, and its client's
// certificate identity in the stream's status.
func (st *stream) setPeer(ctx context.Context) {
	st.ctx = ctx
	if id := peerIdentity(ctx); id != "" {
		st.status.setIdentity(id)
	}
}

// logger returns the stream's logger, which names the stream, its variant
// and its node. It is made on first use: most streams never log.
func (st *stream) logger() *slog.Logger {
	if st.log == nil {
		st.log = st.srv.log.With("stream", st.status.s.ID, "variant", st.status.s.Variant)
		if st.node != nil {
			st.log = st.log.With("node", clip(st.nodeID))
		}
	}
	return st.log
}

// typeOf resolves a request's type URL. A per-type stream refuses any other
// type with InvalidArgument (T2). On ADS an unknown type is logged, recorded
// on the stream's status and ignored: the stream's other types keep working
// (T3). A nil type with a nil error means "ignore the request".
func (st *stream) typeOf(url string) (*resource.Type, error) {
	if st.only != nil {
		if url == "" || url == st.only.URL {
			return st.only, nil
		}
		return nil, status.Errorf(codes.InvalidArgument, "%s stream cannot serve type %q", st.only.Short, url)
	}
	if t := resource.Lookup(url); t != nil {
		return t, nil
	}
	url = clip(url)
	if !st.warnedType { // once per stream: a client may send thousands
		st.warnedType = true
		st.logger().Warn("ignoring request for unknown type (reported once per stream)", "type_url", url)
	}
	st.status.recordError("unknown type URL " + url)
	return nil, nil
}

// maxClientText bounds the text a client sent (a type URL, a NACK's
// message, a node id) as logged and shown in Status: a request may hold
// megabytes of it.
const maxClientText = 1024

// nackText is a NACK's message as logged and shown in Status: clipped,
// with any PEM private key in it redacted (a client's message may quote
// the configuration it rejected).
func nackText(msg string) string { return clip(redact.Text(msg)) }

// clip returns s, cut to maxClientText bytes (on a rune boundary) and
// marked as cut if it is longer.
func clip(s string) string {
	if len(s) <= maxClientText {
		return s
	}
	cut := maxClientText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// start sets the stream's node and starts watching its group on the first
// request (S1), for a request decoded whole (by another codec than ours),
// or one that has no node.
func (st *stream) start(node *corev3.Node) error {
	if st.watcher != nil {
		return nil
	}
	node = keptNode(node)
	return st.startEncoded(encodeNode(node), node)
}

// startFrom is start for a request whose node our codec cut out: a node
// the stream does not know yet (on its first request) starts it.
func (st *stream) startFrom(r *xdswire.RequestNode) error {
	if r.Raw != nil {
		return st.startEncoded(r.Raw, r.Msg)
	}
	return nil
}

// wrapsTTL reports whether node's client takes TTL resources in SotW, in
// Resource wrappers (L3).
func wrapsTTL(node *corev3.Node) bool {
	long, short, ttl := false, false, false
	for _, f := range node.GetClientFeatures() {
		switch f {
		case clientFeatureResourceInSotw:
			long = true
		case clientFeatureResourceInSotwShort:
			short = true
		case clientFeatureResourceTTL:
			ttl = true
		}
	}
	// gRPC's clients send the short spelling and unwrap wrappers, but take
	// a heartbeat (a wrapper without a resource) for a malformed resource:
	// TTLs go to them only with the TTL feature as well.
	return long || (short && ttl)
}

// startEncoded is start for node, the encoding of a node without its
// extensions, which the stream keeps, and msg, node decoded, which it does
// not: thousands of streams keep a few hundred bytes each rather than a
// decoded node of some dozens of allocations. A node Config.Authorize
// refuses does not start the stream: its error ends it.
func (st *stream) startEncoded(node []byte, msg *corev3.Node) error {
	if st.watcher != nil {
		return nil
	}
	if err := st.srv.authorize(st.ctx, msg, st.status.s.Variant); err != nil {
		return err
	}
	st.node, st.nodeID = node, msg.GetId()
	st.wrapTTL = wrapsTTL(msg)
	st.log = nil // made again with the node
	st.status.setNode(node)
	st.watcher = st.srv.cache.WatchEncoded(node, st.waker.wake)
	if st.watcher.HasNews() {
		// Now rather than after the request: its subscription may then
		// share the snapshot's names (adoptNamed) on a per-type stream too.
		st.takeSnapshot()
	}
	return nil
}

// state returns the stream's state for t, creating it.
func (st *stream) state(t *resource.Type) *typeState {
	ts := st.types.get(t)
	if ts == nil {
		ts = newTypeState(t, st.delta)
		st.types.add(ts)
	}
	return ts
}

// handleSotw applies one SotW request (S1 to S8, S13, S14).
func (st *stream) handleSotw(req *discovery.DiscoveryRequest) error {
	return st.handleSotwDigest(req, xdswire.DigestNames(req.GetResourceNames()))
}

// handleSotwDigest is handleSotw for a request whose names have digest d.
// If d is that of the names the type last applied, the request's names
// are not looked at (they may be left undecoded).
func (st *stream) handleSotwDigest(req *discovery.DiscoveryRequest, d xdswire.NamesDigest) error {
	if err := st.start(req.GetNode()); err != nil { // the first request's node, whatever its type (S1)
		return err
	}
	t, err := st.typeOf(req.GetTypeUrl())
	if t == nil {
		return err
	}
	ts := st.state(t)
	nonce := req.GetResponseNonce()
	// A request with another nonce than the latest is stale (S5):
	// superseded by a response the client has not seen yet. Its version
	// says nothing of that response, and it gets no response of its own
	// (one is in flight, and the next waits for its reply), but its names
	// are the client's newest (S7): a name it drops there, it ignores in
	// the response in flight, and names again later only to be sent it
	// again (S10).
	if nonce != "" && nonce == ts.nonce {
		st.recordReply(ts, req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	} else if nonce != "" && nonce == ts.prevNonce {
		st.recordSupersededReply(ts, req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	}
	first := !ts.active
	ts.active = true
	if !ts.namesKnown || ts.namesDigest != d {
		grew := false
		if names := req.GetResourceNames(); !first || !ts.adoptNames(st.snap, names, fNamed|fResend) {
			grew = ts.setNames(names)
		}
		ts.namesDigest, ts.namesKnown = d, true
		// A spontaneous request (no nonce: never stale) that asks for
		// more than the response in flight is answered without waiting
		// for that response's reply (S7): the client sent it before it
		// saw that response, whose reply may never come.
		if grew && nonce == "" && ts.waiting {
			ts.superseded = true
		}
	}
	// Resume only a subscription to everything (S13): of one by name, the
	// version does not tell which of the names the client still holds.
	if first && req.GetVersionInfo() != "" && nonce == "" && ts.wildcard && len(ts.keys) == 0 {
		ts.resume = req.GetVersionInfo()
	}
	return nil
}

// handleDeltaRequest applies one incremental request as received.
func (st *stream) handleDeltaRequest(r *xdswire.DeltaRequest) error {
	if err := st.startFrom(&r.Node); err != nil {
		return err
	}
	return st.handleDelta(&r.Msg)
}

// handleDelta applies one incremental request (D2, D3, D6, D9, D10).
func (st *stream) handleDelta(req *discovery.DeltaDiscoveryRequest) error {
	if err := st.start(req.GetNode()); err != nil { // the first request's node, whatever its type (S1)
		return err
	}
	t, err := st.typeOf(req.GetTypeUrl())
	if t == nil {
		return err
	}
	ts := st.state(t)
	nonce := req.GetResponseNonce()
	if nonce != "" && nonce == ts.nonce {
		st.recordReply(ts, ts.lastVersion, req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
		if ts.nDropped > 0 && !ts.wildcard && !slices.Contains(req.GetResourceNamesSubscribe(), wildcardName) {
			// What it stopped naming while the response was in flight
			// the client did not take in without a wildcard (leaveScope);
			// with one given in this very request, which the client
			// sent once it had the response, it may have (subscribe
			// sends it again, or its removal).
			ts.own()
			ts.clearDropped()
			ts.compact()
		}
	} else if nonce != "" && nonce == ts.prevNonce {
		st.recordSupersededReply(ts, "", req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	}
	// A stale nonce still carries subscription changes (D2).
	first := !ts.active
	ts.active = true
	sub, unsub := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if !first || len(unsub) > 0 || len(req.GetInitialResourceVersions()) > 0 || !ts.adoptNames(st.snap, sub, fNamed) {
		ts.subscribe(sub, unsub, first)
	}
	// A subscription that is not the reply to the response in flight (a
	// stale nonce, or none) is answered without waiting for that reply
	// (D2, S7): Envoy ACKs the response it has just applied and
	// subscribes to what it brought in one request, while a newer
	// response may be on its way.
	if len(sub) > 0 && ts.waiting && nonce != ts.nonce {
		ts.superseded = true
	}
	if first && len(req.GetInitialResourceVersions()) > 0 {
		// What the client has of what it subscribes to (D6); it drops the
		// rest, which a later subscription must send again.
		var items []item
		for name, v := range req.GetInitialResourceVersions() {
			if e := ts.lookup(name); ts.wildcard || (e != nil && e.flags&fNamed != 0) {
				// The snapshot's own resource when the client holds its
				// version (a client back from another replica holds the
				// most), else a bodiless stand-in for that version.
				if r := st.snap.Get(t, name); r != nil && r.Version == v {
					items = append(items, item{key: r.Name, res: r})
				} else {
					items = append(items, item{key: name, res: resource.Placeholder(t, name, v)})
				}
			}
		}
		ts.holdItems(items)
		// Shown as what the client holds, until a response changes it:
		// a client back from another replica may be sent nothing.
		st.status.resumed(ts.t, ts.version())
	}
	return nil
}

// await records that ts's latest response, nonce, awaits its reply.
func (st *stream) await(ts *typeState, nonce string) {
	if ts.superseded && ts.waiting { // its reply may still come: see recordSupersededReply
		ts.prevNonce, ts.prevVersion = ts.nonce, ts.nonceVersion
	} else {
		ts.prevNonce, ts.prevVersion = "", ""
	}
	ts.nonce, ts.nonceVersion, ts.superseded = nonce, ts.lastVersion, false
	if !ts.waiting {
		ts.waiting = true
		st.srv.awaiting.Add(1)
	}
}

// stopWaiting records that ts's latest response awaits no reply any more:
// it was answered, or the stream ended.
func (st *stream) stopWaiting(ts *typeState) {
	ts.superseded = false
	if ts.waiting {
		ts.waiting = false
		st.srv.awaiting.Add(-1)
	}
}

// recordReply records an ACK or NACK of the type's latest response.
func (st *stream) recordReply(ts *typeState, version, msg string, nack bool) {
	st.stopWaiting(ts)
	st.recordAccepted(ts, nack)
	st.recordOutcome(ts, ts.lastVersion, version, msg, nack)
}

// recordSupersededReply records an ACK or NACK of the response a request
// superseded (see typeState.superseded), which came after the response
// sent in its place: the NACK counts, and is logged and shown, as any.
func (st *stream) recordSupersededReply(ts *typeState, version, msg string, nack bool) {
	if !nack {
		version = ts.prevVersion
	}
	st.recordSupersededAccepted(ts, nack)
	st.recordOutcome(ts, ts.prevVersion, version, msg, nack)
	ts.prevNonce, ts.prevVersion = "", ""
}

// recordOutcome records a NACK of the response of version sent, or an ACK
// of version acked, in the warm gate, the log, the status and the metrics.
func (st *stream) recordOutcome(ts *typeState, sent, acked, msg string, nack bool) {
	if nack {
		st.warm.nack(ts.t)
		msg = nackText(msg)
		// A client may NACK the same version again and again (a SotW TTL
		// refresh sends it every TTL/2): the first of a run is a warning,
		// the rest are counted in the metrics and the status only.
		level := slog.LevelWarn
		if h := nackHash(sent, msg); h == ts.nackLogged {
			level = slog.LevelDebug
		} else {
			ts.nackLogged = h
		}
		st.logger().Log(context.Background(), level, "NACK", "type", ts.t.Short, "rejected_version", sent, "message", msg)
		st.status.nack(ts.t, sent, msg)
		st.srv.metrics.nacks[ts.t.Order].Add(1)
		return
	}
	ts.nackLogged = 0
	st.status.ack(ts.t, acked)
	st.srv.metrics.acks[ts.t.Order].Add(1)
}

var nackSeed = maphash.MakeSeed()

// nackHash identifies a NACK by the version it rejects and its message;
// never 0.
func nackHash(version, msg string) uint64 {
	var h maphash.Hash
	h.SetSeed(nackSeed)
	h.WriteString(version)
	h.WriteByte(0)
	h.WriteString(msg)
	return h.Sum64() | 1
}
