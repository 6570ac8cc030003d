package server

import (
	"context"
	"fmt"
	"log/slog"
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

// requestState starts the stream from node, if it is the first request's
// (whatever its type: S1), and returns the state of the type the request
// names: nil, with the error that ends the stream or none, if the request
// is to be ignored.
func (st *stream) requestState(node *corev3.Node, typeURL string) (*typeState, error) {
	if err := st.start(node); err != nil {
		return nil, err
	}
	t, err := st.typeOf(typeURL)
	if t == nil {
		return nil, err
	}
	return st.state(t), nil
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

// errInvalidRequest is the error that ends a stream sent an undecodable
// request: the code grpc-go gives when its own codec cannot decode one, so
// every variant answers garbage alike.
func errInvalidRequest(err error) error {
	return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
}
