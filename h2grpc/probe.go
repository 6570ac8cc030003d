package h2grpc

import (
	"sync"
	"sync/atomic"
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
// with; it waits less than about twice as long (see sweepProbes).
const probeAckMax = 10 * time.Second

// holdProbeAckLocked keeps the answer to a PING that is grpc-go's bandwidth probe
// (data) for the connection's next write, after its frames, or until the
// server's sweep finds that it waited long enough (sweepProbes), and
// reports whether it did. It holds one answer at a time. Call it with wmu
// held.
//
// After a response, such a client pings; answered at once, each response
// would cost the server a second write and the client a second read, in
// the time the change takes to reach every client. Held, the answer rides
// with the next write, nearly always the next response: the client reads
// it after that response's data,
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
func (c *conn) holdProbeAckLocked(data []byte) bool {
	if [8]byte(data) != bdpProbe || c.ackHeld || c.werr != nil || !c.ready {
		return false
	}
	c.ackHeld, c.ackSweeps = true, c.srv.probes.sweeps.Load()
	c.srv.armProbeSweep()
	if h := c.srv.probes.holds; h != nil {
		select { // a test waits for it
		case h <- struct{}{}:
		default:
		}
	}
	return true
}

// probeAnswers is the state of the sweep that sends the answers to
// bandwidth probes that found no frames to go with (Server.sweepProbes):
// one timer per server, armed when an answer is held and none is armed,
// rather than a timer per connection, and no list of the connections that
// hold one, which every hold would have to lock.
//
// Locking: mu guards timer and stopped; a sweep joins running under mu
// unless stopped, so stopProbeSweeps can wait for it.
type probeAnswers struct {
	wait   time.Duration // probeAckMax, unless a test sets it before Serve
	holds  chan struct{} // if not nil (a test's, set before Serve), told of each answer held
	armed  atomic.Bool   // the timer will run a sweep
	sweeps atomic.Uint64 // sweeps started

	mu      sync.Mutex
	timer   *time.Timer    // runs sweepProbes; nil until the first answer is held
	stopped bool           // the server has stopped: the timer is not armed again, nor sweeps begun
	running sync.WaitGroup // the sweeps the timer began
}

// armProbeSweep arms the sweep, unless it is armed.
func (s *Server) armProbeSweep() {
	p := &s.probes
	if p.armed.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.armed.Load() {
		return
	}
	p.armed.Store(true)
	if p.timer == nil {
		p.timer = time.AfterFunc(p.wait, s.sweepProbes)
	} else {
		p.timer.Reset(p.wait)
	}
}

// sweepProbes writes the held answers that were held before the last
// sweep began, and arms the next sweep for the others. Sweeps begin at
// least a wait apart (the timer is armed after one begins), so an answer
// waits at least a wait and less than about two. A connection that a
// sender is writing is passed over (its sender's flush takes the answer
// along) and swept again next time, so that a client that does not read
// holds up no other's answer; and the next sweep is armed before each
// answer is written, so that if the write waits for such a client, the
// next sweep goes on past it.
func (s *Server) sweepProbes() {
	p := &s.probes
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.running.Add(1)
	p.mu.Unlock()
	defer p.running.Done()
	s.sweep()
}

// sweep is sweepProbes's work.
func (s *Server) sweep() {
	s.probes.armed.Store(false)
	sweep := s.probes.sweeps.Add(1)
	for _, c := range s.openConns() {
		if !c.wmu.TryLock() {
			s.armProbeSweep()
			continue
		}
		if c.ackHeld {
			s.armProbeSweep()
			if c.ackSweeps+2 <= sweep {
				_ = c.flushLocked()
			}
		}
		c.wmu.Unlock()
	}
}

// stopProbeSweeps arms no more sweeps, once the server's connections have
// ended, and waits for a sweep under way (its writes fail at once).
func (s *Server) stopProbeSweeps() {
	p := &s.probes
	p.mu.Lock()
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.running.Wait() // no sweep joins once stopped is set
}
