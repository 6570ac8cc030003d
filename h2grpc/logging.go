package h2grpc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// The errors of a client that does not speak HTTP/2.
var (
	errNotPreface = errors.New("h2grpc: not an HTTP/2 client preface")
	errNotH2      = errors.New("h2grpc: the client negotiated a protocol other than h2")
)

// Bounds of the lines a Server logs about clients it disconnected for
// breaking the protocol (logLimit): violationBurst at once, then one per
// violationEvery on average.
const (
	violationBurst = 10
	violationEvery = time.Second
)

// logLimit is a token bucket that bounds the lines a Server logs about
// clients it disconnected, so that clients breaking the protocol, on as
// many connections as they like, cannot flood the log: one line per
// connection, and these bounds across the server. The lines it drops are
// counted in the next it lets through.
type logLimit struct {
	mu         sync.Mutex
	tokens     float64
	last       time.Time // when tokens was last brought up to date; zero before the first line
	suppressed int       // lines dropped since the last let through
}

// allow reports whether a line may be logged at now and, if so, how many
// were dropped before it.
func (l *logLimit) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() {
		l.tokens = violationBurst
	} else if d := now.Sub(l.last); d > 0 {
		l.tokens = min(violationBurst, l.tokens+float64(d)/float64(violationEvery))
	}
	l.last = now
	if l.tokens < 1 {
		l.suppressed++
		return false, 0
	}
	l.tokens--
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// violationLevel returns the level at which a connection ending with err
// is worth telling an operator of, and whether it is: the client broke
// the protocol or a policy (a connection error, sent in GOAWAY: at Warn),
// or did not speak HTTP/2 (at Info). A connection that the client closed
// or reset, or that failed or timed out, is not.
func violationLevel(err error) (slog.Level, bool) {
	var ce http2.ConnectionError
	var ge goAwayError
	switch {
	case errors.As(err, &ce), errors.As(err, &ge):
		return slog.LevelWarn, true
	case errors.Is(err, errNotPreface), errors.Is(err, errNotH2):
		return slog.LevelInfo, true
	}
	return slog.LevelDebug, false
}

// logEnd logs why the connection ends, err (neither the client's close nor
// the server's): a violation (violationLevel) at its level, with the
// client's address, within the server's bounds (logLimit); anything
// else, or a violation past those bounds, at Debug.
func (c *conn) logEnd(err error) {
	log := c.srv.opts.Logger
	peer := c.raw.RemoteAddr().String()
	level, violation := violationLevel(err)
	if !violation {
		log.Debug("h2grpc: connection ends", "peer", peer, "error", err)
		return
	}
	ok, suppressed := c.srv.violations.allow(time.Now())
	if !ok {
		log.Debug("h2grpc: disconnected a client for a protocol violation", "peer", peer, "error", err)
		return
	}
	attrs := []any{"peer", peer, "error", err}
	if c.fr != nil && c.fr.ErrorDetail() != nil { // the framer's word on its error
		attrs = append(attrs, "detail", c.fr.ErrorDetail().Error())
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	log.Log(context.Background(), level, "h2grpc: disconnected a client for a protocol violation", attrs...)
}

// logRefusal logs, at Warn, that a bound refused the client of c a stream
// or a message, within the server's bounds for such lines (a logLimit of
// its own; the rest at Debug, the next line counting them).
func (c *conn) logRefusal(what string, id uint32) {
	log := c.srv.opts.Logger
	level := slog.LevelDebug
	ok, suppressed := c.srv.refusals.allow(time.Now())
	if ok {
		level = slog.LevelWarn
	}
	if !log.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"stream", id}
	if c.raw != nil {
		attrs = append(attrs, "peer", c.raw.RemoteAddr().String())
	}
	if suppressed > 0 {
		attrs = append(attrs, "refusals_not_logged", suppressed)
	}
	log.Log(context.Background(), level, "h2grpc: refused a client "+what, attrs...)
}
