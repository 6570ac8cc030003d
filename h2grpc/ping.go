package h2grpc

import (
	"time"

	"golang.org/x/net/http2"
)

// maxPingStrikes is how many pings may come sooner than
// Options.MinPingInterval after the previous one, with nothing sent in
// between, before the connection is closed (grpc-go's number).
const maxPingStrikes = 2

// A client may send settingsBurst SETTINGS frames at once, and
// settingsPerSecond a second after that: past it, the connection is closed
// with GOAWAY ENHANCE_YOUR_CALM "too_many_settings". Clients send one when
// they connect, and grpc-go's a few more as it grows its windows; each
// costs the server an answer and, with many streams, a walk of them.
const (
	settingsBurst     = 100
	settingsPerSecond = 10
)

// errTooManySettings is what a client that sends SETTINGS too often is told.
var errTooManySettings = goAwayError{code: http2.ErrCodeEnhanceYourCalm, debug: "too_many_settings"}

// checkSettings applies the SETTINGS policy to a SETTINGS frame received
// at now, a token bucket of settingsBurst tokens refilled at
// settingsPerSecond. It runs on the connection's goroutine.
func (c *conn) checkSettings(now time.Time) error {
	if c.lastSettings.IsZero() {
		c.settingsTokens = settingsBurst
	} else {
		c.settingsTokens = min(settingsBurst, c.settingsTokens+now.Sub(c.lastSettings).Seconds()*settingsPerSecond)
	}
	c.lastSettings = now
	if c.settingsTokens < 1 {
		return errTooManySettings
	}
	c.settingsTokens--
	return nil
}

// goAwayError ends a connection with GOAWAY carrying code and debug data:
// for a client that breaks a policy rather than the protocol.
type goAwayError struct {
	code  http2.ErrCode
	debug string
}

func (e goAwayError) Error() string { return "h2grpc: GOAWAY " + e.code.String() + ": " + e.debug }

// errTooManyPings is what a client that pings too often is told, as
// grpc-go's keepalive enforcement tells it: grpc-go clients then ping less.
var errTooManyPings = goAwayError{code: http2.ErrCodeEnhanceYourCalm, debug: "too_many_pings"}

// checkPing applies the ping policy to a PING received (and answered) at
// now: a ping sooner than MinPingInterval after the previous one is a
// strike; the server sending headers, data or trailers clears the strikes
// (a client answering data, as grpc-go's bandwidth probe does, is never
// struck); past maxPingStrikes the connection is closed. It runs on the
// connection's goroutine.
func (c *conn) checkPing(now time.Time) error {
	minGap := c.srv.opts.MinPingInterval
	if minGap < 0 {
		return nil
	}
	last := c.lastPing
	c.lastPing = now
	if c.sentSincePing.Swap(false) {
		c.pingStrikes = 0
		return nil
	}
	if !last.IsZero() && now.Sub(last) < minGap {
		c.pingStrikes++
	}
	if c.pingStrikes > maxPingStrikes {
		return errTooManyPings
	}
	return nil
}
