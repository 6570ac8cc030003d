package h2grpc

import (
	"time"

	"golang.org/x/net/http2"
)

// maxPingStrikes is how many pings may come sooner than
// Options.MinPingInterval after the previous one, with nothing sent in
// between, before the connection is closed (grpc-go's number).
const maxPingStrikes = 2

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

// bdpProbe is the data of the PING grpc-go's clients send to estimate the
// connection's bandwidth-delay product: one after each run of DATA frames
// they receive, while their windows are left to the estimate (the default).
// The estimate only grows windows, and only from runs of data larger than
// a window's two thirds, so small responses never end the probes.
var bdpProbe = [8]byte{2, 4, 16, 16, 9, 14, 7, 7}

// probeAckMax bounds how long a probe's answer waits for frames to go with.
const probeAckMax = 10 * time.Second

// holdProbeAck keeps the answer to a PING that is grpc-go's bandwidth probe
// (data) for the connection's next write, after its frames, or for
// probeAckMax if none comes sooner, and reports whether it did; it keeps one at a time.
// Call it with wmu held.
//
// After a response, such a client pings; answered at once, each response
// would cost a second write and the client a second read, inside the
// time the change takes to reach every client. Held, the answer rides
// with the next response: the client reads it after that response's data,
// which it counts into the probe it still has out instead of starting a
// new one, so it probes every other response. The probe's round trip then
// measures as long: the client's estimate of the bandwidth stays low and
// grows its windows no further until the probes of a long run of data,
// answered with that data's next frames, bring the round trip back down.
// grpc-go sets no deadline on the answer; any other PING is answered at
// once.
func (c *conn) holdProbeAck(data []byte) bool {
	if [8]byte(data) != bdpProbe || c.ackHeld || c.werr != nil || !c.ready {
		return false
	}
	c.ackHeld = true
	if c.ackTimer == nil {
		c.ackTimer = time.AfterFunc(c.srv.probeAckMax, c.releaseProbeAck)
	} else {
		c.ackTimer.Reset(c.srv.probeAckMax)
	}
	return true
}

// releaseProbeAck writes a held probe's answer that found nothing to go
// with (holdProbeAck).
func (c *conn) releaseProbeAck() {
	c.wmu.Lock()
	if c.ackHeld {
		_ = c.flushLocked()
	}
	c.wmu.Unlock()
}
