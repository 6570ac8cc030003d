package server

import (
	"sync/atomic"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// admission bounds the streams a server takes (Config.MaxStreams,
// StreamsPerSecond): a stream over a bound is refused at once with
// UNAVAILABLE, for its client to try again later or elsewhere, rather
// than be served in a storm. Safe for concurrent use.
type admission struct {
	max     int64         // 0: no bound
	limiter *rate.Limiter // nil: no bound on the rate
	open    atomic.Int64  // streams admitted and not yet ended
	// Refusals, for the metrics.
	refusedMax, refusedRate atomic.Uint64
}

// Errors of a refused stream.
var (
	errTooManyStreams = status.Error(codes.Unavailable, "xdsd: this server has as many streams as it takes; try again later, or another server")
	errStreamRate     = status.Error(codes.Unavailable, "xdsd: this server takes no more new streams this second; try again later, or another server")
)

func newAdmission(cfg Config) *admission {
	a := &admission{max: int64(max(cfg.MaxStreams, 0))}
	if cfg.StreamsPerSecond > 0 {
		burst := cfg.StreamBurst
		if burst <= 0 {
			burst = max(int(cfg.StreamsPerSecond), 1)
		}
		a.limiter = rate.NewLimiter(rate.Limit(cfg.StreamsPerSecond), burst)
	}
	return a
}

// admit takes a stream in, or returns why not; a stream taken in is let
// go with leave.
func (a *admission) admit() error {
	if n := a.open.Add(1); a.max > 0 && n > a.max {
		a.open.Add(-1)
		a.refusedMax.Add(1)
		return errTooManyStreams
	}
	if a.limiter != nil && !a.limiter.Allow() {
		a.open.Add(-1)
		a.refusedRate.Add(1)
		return errStreamRate
	}
	return nil
}

// leave lets go of a stream admit took in.
func (a *admission) leave() { a.open.Add(-1) }
