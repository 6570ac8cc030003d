package h2grpc

import (
	"sync"
	"time"
)

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
// with; it waits at most twice as long (see probeAnswers).
const probeAckMax = 10 * time.Second

// holdProbeAck keeps the answer to a PING that is grpc-go's bandwidth probe
// (data) for the connection's next write, after its frames, or until the
// server's sweep finds that it waited long enough (probeAnswers), and
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
	c.srv.probes.add(c)
	return true
}

// probeAnswers sends the answers to bandwidth probes that found no frames
// to go with: one timer per server sweeps the connections that held one
// when it was armed, every wait, and writes those that have waited a whole
// wait. (A timer per connection would cost each some 700 bytes of RSS at
// 5,000 connections: allocated during the sync, they keep its pages.)
//
// Locking: mu guards every field but wait, and each listed connection's
// ackListed. A goroutine holding a connection's wmu may take mu; one
// holding mu takes no wmu.
type probeAnswers struct {
	wait time.Duration // probeAckMax, unless a test sets it before Serve

	mu      sync.Mutex
	conns   []*conn     // holding an answer when listed; some may have sent it since
	timer   *time.Timer // runs sweep; nil until the first answer is held
	armed   bool        // timer will run
	stopped bool        // the server has stopped: the timer is not armed again
}

// add lists c, which holds an answer, for the next sweep.
func (p *probeAnswers) add(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !c.ackListed {
		c.ackListed = true
		p.conns = append(p.conns, c)
	}
	if p.armed || p.stopped {
		return
	}
	p.armed = true
	if p.timer == nil {
		p.timer = time.AfterFunc(p.wait, p.sweep)
	} else {
		p.timer.Reset(p.wait)
	}
}

// sweep writes the answers that have waited a whole wait, and lists again
// those still held that have not.
func (p *probeAnswers) sweep() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.armed = nil, false
	for _, c := range conns {
		c.ackListed = false
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.wmu.Lock()
		if c.ackHeld {
			if time.Since(c.ackSince) >= p.wait {
				_ = c.flushLocked()
			} else {
				p.add(c)
			}
		}
		c.wmu.Unlock()
	}
}

// stop stops the sweeps, once the server's connections have ended.
func (p *probeAnswers) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.conns = nil
}
