package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/authz"
)

// refusals counts and logs the clients Config.Authorize refuses.
type refusals struct {
	count atomic.Uint64
	// mu guards log and quiet: the log lines are rate-limited, and the
	// next line logged says how many were not.
	mu    sync.Mutex
	log   *rate.Limiter
	quiet uint64
}

func newRefusals() refusals {
	return refusals{log: rate.NewLimiter(5, 10)}
}

// refusedError is a refusal by Config.Authorize, as a gRPC status: the
// stream's step does not log it again.
type refusedError struct{ st *status.Status }

func (e refusedError) Error() string              { return e.st.Err().Error() }
func (e refusedError) GRPCStatus() *status.Status { return e.st }

// authorize asks Config.Authorize whether the client of ctx may claim
// node, for what ("ads/sotw", "rest/clusters", ...); it counts and logs
// a refusal, and returns it as a gRPC status.
func (s *Server) authorize(ctx context.Context, node *corev3.Node, what string) error {
	if s.cfg.Authorize == nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	err := s.cfg.Authorize(ctx, node)
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(codes.PermissionDenied, err.Error())
	}
	s.refusals.count.Add(1)
	r := &s.refusals
	r.mu.Lock()
	logIt := r.log.Allow()
	quiet := r.quiet
	if logIt {
		r.quiet = 0
	} else {
		r.quiet++
	}
	r.mu.Unlock()
	if logIt {
		attrs := []any{"variant", what, "node", clip(node.GetId()), "identity", clip(peerIdentity(ctx)), "reason", clip(st.Message())}
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			attrs = append(attrs, "peer", p.Addr.String())
		}
		if quiet > 0 {
			attrs = append(attrs, "refusals_not_logged", quiet)
		}
		s.log.Warn("refused a client the node it claims", attrs...)
	}
	return refusedError{st}
}

// isRefusal reports whether err is a refusal by Config.Authorize.
func isRefusal(err error) bool {
	_, ok := errors.AsType[refusedError](err)
	return ok
}

// Refusals returns how many streams, Fetch calls and REST requests
// Config.Authorize has refused since New.
func (s *Server) Refusals() uint64 { return s.refusals.count.Load() }

// peerIdentity is the identity of the verified client certificate of
// ctx's peer (see authz.Identity); "" without one.
func peerIdentity(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	return authz.Identity(authz.PeerCertificate(ctx))
}

// restContext returns r's context carrying its client as a gRPC peer, as
// the gRPC transports give it to a stream: its address and, on TLS, a
// credentials.TLSInfo.
func restContext(r *http.Request) context.Context {
	p := &peer.Peer{}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		p.Addr = net.TCPAddrFromAddrPort(ap)
	}
	if r.TLS != nil {
		p.AuthInfo = credentials.TLSInfo{State: *r.TLS, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	}
	return peer.NewContext(r.Context(), p)
}
