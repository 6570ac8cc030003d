package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// clientFeatureResourceInSotw is the client feature that lets SotW
// responses carry Resource wrappers (PROTOCOL L3).
const clientFeatureResourceInSotw = "xds.config.supports-resource-in-sotw"

// stream is one xDS stream. All of its fields are owned by the goroutine
// running run: no lock guards them. Only status is shared (it has its own).
type stream struct {
	srv   *Server
	delta bool
	only  *resource.Type // the type of a per-type service; nil for ADS
	log   *slog.Logger

	node          *corev3.Node // from the first request (S1)
	wrapTTL       bool         // client accepts Resource wrappers in SotW
	watcher       *cache.Watcher
	snap          *cache.Snapshot
	publishedAt   time.Time // when snap was published; zero once measured
	types         map[*resource.Type]*typeState
	warm          warmGate
	hb            heartbeat
	status        *streamStatus
	sendSotw      func(*discovery.DiscoveryResponse) error
	sendDeltaResp func(*discovery.DeltaDiscoveryResponse) error
	// sendWire, when set, sends a response assembled from pre-encoded
	// parts (a *wireResponse) instead of a message.
	sendWire func(any) error
}

// run is the stream's owner loop: one goroutine receives requests and hands
// them over; this one handles requests, snapshot kicks and timers, and is
// the only one that sends.
func run[Req any](ctx context.Context, st *stream, recv func() (Req, error), handle func(Req) error) error {
	reqs := make(chan Req)
	errc := make(chan error, 1)
	go func() {
		// Ends when Recv fails, which it does once the RPC is over.
		for {
			req, err := recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer st.close()
	for {
		var kick <-chan struct{}
		if st.watcher != nil {
			kick = st.watcher.Kick()
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case req := <-reqs:
			if err := handle(req); err != nil {
				st.log.Warn("closing stream", "error", err)
				return err
			}
		case <-kick:
			st.takeSnapshot()
		case <-st.warm.expired():
			st.warm.clear()
		case <-st.hb.fired():
			if err := st.sendHeartbeats(); err != nil {
				return err
			}
		}
		if err := st.push(); err != nil {
			return err
		}
		st.publishedAt = time.Time{} // later responses answer requests, not the publication
		st.rearmHeartbeat()
	}
}

// takeSnapshot adopts the watcher's latest snapshot and marks what changed.
func (st *stream) takeSnapshot() {
	snap, pending, at := st.watcher.Take()
	st.snap, st.publishedAt = snap, at
	for _, ts := range st.types {
		if pending.All {
			ts.reeval = true
			continue
		}
		for _, ch := range pending.Changes {
			ts.markDirty(ch[ts.t])
		}
	}
}

func (st *stream) close() {
	st.warm.clear()
	st.hb.stop()
	if st.watcher != nil {
		st.watcher.Close()
	}
	st.srv.status.remove(st.status)
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
	st.log.Warn("ignoring request for unknown type", "type_url", url)
	st.status.recordError("unknown type URL " + url)
	return nil, nil
}

// start sets the stream's node and starts watching its group on the first
// request (S1).
func (st *stream) start(node *corev3.Node) {
	if st.watcher != nil {
		return
	}
	if node == nil {
		node = &corev3.Node{}
	}
	st.node = node
	for _, f := range node.GetClientFeatures() {
		if f == clientFeatureResourceInSotw {
			st.wrapTTL = true
		}
	}
	st.log = st.log.With("node", node.GetId())
	st.status.setNode(node)
	st.watcher = st.srv.cache.Watch(node)
}

// state returns the stream's state for t, creating it.
func (st *stream) state(t *resource.Type) *typeState {
	ts := st.types[t]
	if ts == nil {
		ts = newTypeState(t)
		st.types[t] = ts
	}
	return ts
}

// handleSotw applies one SotW request (S1 to S8, S13, S14).
func (st *stream) handleSotw(req *discovery.DiscoveryRequest) error {
	t, err := st.typeOf(req.GetTypeUrl())
	if t == nil {
		return err
	}
	st.start(req.GetNode())
	ts := st.state(t)
	nonce := req.GetResponseNonce()
	if nonce != "" && ts.nonce != "" && nonce != ts.nonce {
		// Stale: superseded by a response the client has not seen yet (S5).
		return nil
	}
	if nonce != "" && nonce == ts.nonce {
		ts.waiting = false
		st.recordReply(ts, req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	}
	first := !ts.active
	ts.active = true
	ts.setNames(req.GetResourceNames())
	if first && req.GetVersionInfo() != "" && nonce == "" {
		ts.resume = req.GetVersionInfo()
	}
	return nil
}

// handleDelta applies one incremental request (D2, D3, D6, D9, D10).
func (st *stream) handleDelta(req *discovery.DeltaDiscoveryRequest) error {
	t, err := st.typeOf(req.GetTypeUrl())
	if t == nil {
		return err
	}
	st.start(req.GetNode())
	ts := st.state(t)
	if nonce := req.GetResponseNonce(); nonce != "" && nonce == ts.nonce {
		ts.waiting = false
		st.recordReply(ts, ts.lastVersion, req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	}
	// A stale nonce still carries subscription changes (D2).
	first := !ts.active
	ts.active = true
	ts.subscribe(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe(), first)
	if first {
		for name, v := range req.GetInitialResourceVersions() {
			ts.hold(name, resource.Placeholder(t, name, v))
		}
	}
	return nil
}

// recordReply records an ACK or NACK of the type's latest response.
func (st *stream) recordReply(ts *typeState, version, msg string, nack bool) {
	if nack {
		st.log.Warn("NACK", "type", ts.t.Short, "rejected_version", ts.lastVersion, "message", msg)
		st.status.nack(ts.t, ts.lastVersion, msg)
		st.srv.metrics.nacks[ts.t.Order].Add(1)
		return
	}
	st.status.ack(ts.t, version)
	st.srv.metrics.acks[ts.t.Order].Add(1)
}
