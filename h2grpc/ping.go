package h2grpc

import (
	"math/rand/v2"
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
// connection's bandwidth-delay product, when they leave their windows to
// the estimate (the default): a client sends one, after a WINDOW_UPDATE,
// on the first DATA frame it receives while no probe is out. The estimate
// grows the windows only when a probe's sample (the bytes received until
// its answer) reaches two thirds of the current estimate at the highest
// bandwidth seen so far; small responses never do, so such a client probes
// on response after response.
var bdpProbe = [8]byte{2, 4, 16, 16, 9, 14, 7, 7}

// probeAckMax is the least a probe's answer may wait for frames to go
// with; each connection waits between once and twice as long, so that the
// answers to the probes one change brought do not all go at once.
const probeAckMax = 10 * time.Second

// holdProbeAck keeps the answer to a PING that is grpc-go's bandwidth probe
// (data) for the connection's next write, after its frames, or until the
// connection's wait (see probeAckMax) if no write comes sooner, and
// reports whether it did. It holds one answer at a time. Call it with wmu
// held.
//
// After a response, such a client pings; answered at once, each response
// would cost the server a second write and the client a second read, in
// the time the change takes to reach every client. Held, the answer rides
// with the next response: the client reads it after that response's data,
// which it counts into the probe it still has out instead of starting a
// new one, so it probes every other response.
//
// RFC 9113 §6.7 asks that PING answers go before other frames; this one
// waits, because its sender sets no deadline on it and uses it only to
// size windows, which matter only while data flows, and then the answer
// goes with that data. The probe's round trip then measures as long as the
// wait: the client's estimate grows its windows no further until the
// probes of a long run of data, answered with its next frames, bring the
// round trip back down (in grpc-go, four or five probes). Any other PING
// is answered at once, and takes a held answer with it.
func (c *conn) holdProbeAck(data []byte) bool {
	if [8]byte(data) != bdpProbe || c.ackHeld || c.werr != nil || !c.ready {
		return false
	}
	c.ackHeld, c.ackSince = true, time.Now()
	if c.ackTimer == nil {
		c.ackWait = c.srv.probeAckMax + rand.N(c.srv.probeAckMax)
		c.ackTimer = time.AfterFunc(c.ackWait, c.releaseProbeAck)
	} else {
		c.ackTimer.Reset(c.ackWait)
	}
	return true
}

// releaseProbeAck writes a held probe's answer that found nothing to go
// with (holdProbeAck). A firing that a later hold's Reset came too late to
// stop finds that answer not yet due, and leaves it to the next.
func (c *conn) releaseProbeAck() {
	c.wmu.Lock()
	if c.ackHeld && time.Since(c.ackSince) >= c.ackWait {
		_ = c.flushLocked()
	}
	c.wmu.Unlock()
}
