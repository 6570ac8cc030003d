// Package server serves xDS v3 from a cache.Cache over every gRPC variant:
// aggregated (ADS) and per-type services, state of the world (SotW) and
// incremental (delta).
//
// An idle stream has one goroutine, its gRPC handler, blocked receiving;
// it handles each request under the stream's lock. A publication or a
// timer wakes the stream, and a worker of a shared pool pushes for it.
// Publishing a snapshot never blocks on a stream, and a client that stops
// reading holds up only the worker pushing to it: when every worker has
// been busy for workStall without finishing, more start. Streams that
// hold every resource of a type at its current version share one record
// of it. Each type has at most one un-ACKed response in flight per
// stream; newer states coalesce while it waits. A NACKed version is
// recorded (see Server.Status) and not sent again.
//
// A stream's turns are in turn.go, waker.go and workers.go; each variant's
// requests and responses in sotw.go and delta.go, their replies in
// reply.go, ADS order in push.go; the wire format of requests and
// responses is package server/internal/xdswire. docs/architecture.md maps
// every file.
//
// On an ADS stream, a request for a type URL that xdsd does not serve is
// logged, recorded as the stream's LastError and ignored: the stream stays
// open and its other types keep working. A per-type stream asked for another
// type is closed with InvalidArgument.
//
// With Config.Authorize, a client is served only a node it may claim: the
// node of a stream's first request, decided once, and of each Fetch call
// and REST request.
package server

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// Config configures a Server. The zero value is ready to use.
type Config struct {
	// Logger receives one line per NACK, per ignored request and per stream
	// closed with an error. Nil discards them.
	Logger *slog.Logger
	// WarmTimeout bounds how long an ADS stream holds listener and route
	// updates while the client has not yet requested the endpoints of new
	// clusters (PROTOCOL O1). Zero or less means one second: the wait is
	// not turned off, since a listener sent first could route traffic to
	// clusters that have no endpoints yet.
	WarmTimeout time.Duration
	// MaxStreams, if positive, bounds the streams open at once: one more
	// is refused at once with UNAVAILABLE, for its client to try again
	// later, or another server.
	MaxStreams int
	// StreamsPerSecond, if positive, bounds how fast new streams are
	// taken in: a token bucket that holds StreamBurst (zero: a second's
	// worth). A stream over it is refused with UNAVAILABLE, so that a
	// server restarted under thousands of reconnecting clients syncs
	// them at the pace it set, the rest retrying (or going elsewhere).
	StreamsPerSecond float64
	// StreamBurst is the bucket's size; see StreamsPerSecond.
	StreamBurst int
	// Authorize, if set, decides whether a client may claim the node it
	// names: once per stream, on its first request, with that request's
	// node (later requests' nodes are ignored, so the decision holds for
	// the stream's life), and on each Fetch call and REST request. ctx
	// carries the client's peer (peer.FromContext), whose AuthInfo is a
	// credentials.TLSInfo on TLS, on REST too; node has no extensions. An
	// error refuses the client, sent nothing: a stream or Fetch call ends
	// with the error's gRPC status if it has one, else PermissionDenied
	// and its text; a REST request is answered 403 Forbidden with the
	// status's message. Refusals are counted (xdsd_authz_denied_total)
	// and logged, a few a second at most.
	Authorize func(ctx context.Context, node *corev3.Node) error
}

// Server serves the snapshots of a cache.Cache over xDS. Create it with
// New and attach it to a grpc.Server with Register.
type Server struct {
	// Read-only after New.
	cfg   Config
	cache *cache.Cache
	log   *slog.Logger

	nonce   atomic.Uint64 // nonces are unique across all streams
	workers workers       // run the streams' wake-ups
	status  statusRegistry
	metrics counters
	// awaiting counts the responses sent whose clients have not yet ACKed
	// or NACKed them, across streams (see AwaitingReplies).
	awaiting  atomic.Int64
	admission *admission
	// controlPlane is what responses carry in control_plane; nil: nothing
	// (see SetControlPlane).
	controlPlane atomic.Pointer[controlPlane]
	refusals     refusals
}

// New returns a Server that serves the snapshots of c.
func New(c *cache.Cache, cfg Config) *Server {
	if cfg.WarmTimeout <= 0 {
		cfg.WarmTimeout = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{cfg: cfg, cache: c, log: log, admission: newAdmission(cfg), refusals: newRefusals()}
}

// Cache returns the cache the server serves.
func (s *Server) Cache() *cache.Cache { return s.cache }

// Status returns the status of every open stream, ordered by stream ID.
func (s *Server) Status() []StreamStatus { return s.status.snapshot(true) }

// AwaitingReplies returns how many of the responses sent, one at most per
// stream and type, their clients have not yet ACKed or NACKed: thousands
// while a fleet syncs, and none once it has, but for clients that are slow
// or stuck. A process embedding the server can tell a lull in a burst of
// work from its end by it.
func (s *Server) AwaitingReplies() int64 { return s.awaiting.Load() }

// StreamsOpened returns how many streams have opened since New. A process
// embedding the server can tell a burst of work that brought new clients
// (their sync) from one that served those it had (pushes) by it.
func (s *Server) StreamsOpened() uint64 { return s.status.opened() }

// Streams returns the number of open streams: those taken in and not yet
// ended, as the bounds on streams count them (Config.MaxStreams).
func (s *Server) Streams() int { return int(s.admission.open.Load()) }

// Responses returns the number of responses sent since New.
func (s *Server) Responses() uint64 { return s.metrics.responses.Load() }

func (s *Server) nextNonce() string {
	return strconv.FormatUint(s.nonce.Add(1), 10)
}

func (s *Server) newStream(delta bool, only *resource.Type) *stream {
	variant := "ads"
	if only != nil {
		variant = only.Short
	}
	if delta {
		variant += "/delta"
	} else {
		variant += "/sotw"
	}
	st := &stream{
		srv:    s,
		delta:  delta,
		only:   only,
		status: s.status.add(variant),
	}
	st.waker.pool = &s.workers
	st.turnEnded.L = &st.gate
	s.workers.attach()
	return st
}

// sotwStream is what a SotW gRPC stream offers.
type sotwStream = grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]

// deltaStream is what an incremental gRPC stream offers.
type deltaStream = grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]

// serveSotw runs a SotW stream; only is nil for ADS.
func (s *Server) serveSotw(gs sotwStream, only *resource.Type) error {
	if err := s.admission.admit(); err != nil {
		return err
	}
	defer s.admission.leave()
	st := s.newStream(false, only)
	st.setPeer(gs.Context())
	st.sendSotw, st.sendWire = gs.Send, gs.SendMsg
	st.useFastPaths(gs)
	recv := func() (*xdswire.SotwRequest, error) {
		r := new(xdswire.SotwRequest)
		return r, gs.RecvMsg(r)
	}
	return serve(st, recv, st.handleSotwWire)
}

// serveDelta runs an incremental stream; only is nil for ADS.
func (s *Server) serveDelta(gs deltaStream, only *resource.Type) error {
	if err := s.admission.admit(); err != nil {
		return err
	}
	defer s.admission.leave()
	st := s.newStream(true, only)
	st.setPeer(gs.Context())
	st.sendDeltaResp, st.sendWire = gs.Send, gs.SendMsg
	st.useFastPaths(gs)
	recv := func() (*xdswire.DeltaRequest, error) {
		r := &xdswire.DeltaRequest{Snap: st.names.Load(), Only: st.only}
		r.Node.Known = st.node // set on this goroutine, in a turn of its own
		return r, gs.RecvMsg(r)
	}
	return serve(st, recv, st.handleDeltaRequest)
}

// fetch answers a unary Fetch* call with the resources the request names
// (or, for wildcard types with no names, all of them) in the node's group.
func (s *Server) fetch(ctx context.Context, req *discovery.DiscoveryRequest, t *resource.Type) (*discovery.DiscoveryResponse, error) {
	if url := req.GetTypeUrl(); url != "" && url != t.URL {
		return nil, status.Errorf(codes.InvalidArgument, "%s service cannot serve type %q", t.Short, url)
	}
	node := keptNode(req.GetNode())
	if err := s.authorize(ctx, node, "fetch/"+t.Short); err != nil {
		return nil, err
	}
	snap := s.cache.Snapshot(s.cache.GroupOf(node))
	resp, _ := s.current(snap, t, req.GetResourceNames(), wrapsTTL(req.GetNode()))
	return resp, nil
}

// current builds the SotW response for a one-shot subscription to names of
// type t (REST and Fetch): every subscribed resource that exists, with the
// set's version. With wrap (a client that accepts Resource wrappers, L3),
// a resource with a TTL goes in a wrapper that carries it; ttl is then the
// shortest TTL in the response, zero if none.
func (s *Server) current(snap *cache.Snapshot, t *resource.Type, names []string, wrap bool) (resp *discovery.DiscoveryResponse, ttl time.Duration) {
	ts := newTypeState(t, false)
	ts.setNames(names)
	w := ts.evaluate(snap)
	items := slices.SortedFunc(slices.Values(w.upserts), compareItems) // a copy: the upserts may be shared
	resp = &discovery.DiscoveryResponse{TypeUrl: t.URL, Nonce: s.nextNonce(), ControlPlane: s.controlPlane.Load().message()}
	var xor uint64
	for _, it := range items {
		body := it.res.Body
		if wrap && it.res.TTL > 0 {
			body = ttlWrapper(it.res)
			if ttl == 0 || it.res.TTL < ttl {
				ttl = it.res.TTL
			}
		}
		resp.Resources = append(resp.Resources, body)
		xor ^= it.res.Hash()
	}
	resp.VersionInfo = resource.SetVersion(xor)
	return resp, ttl
}
