package h2grpc

import (
	"sync"
	"syscall"
	"time"
)

// PullOnly makes s read every frame in its read loop, none inside socket
// reads, so that tests can compare the two paths. Call it before Serve.
func PullOnly(s *Server) { s.pullOnly = true }

// SetProbeAckMax sets how long s holds the answer to a client's bandwidth
// probe for frames to go with. Call it before Serve.
func SetProbeAckMax(s *Server, d time.Duration) { s.probes.wait = d }

// ProbeHolds returns a channel that s tells of each probe's answer it
// holds, when it can take it at once. Call it before Serve; later calls
// return the same channel.
func ProbeHolds(s *Server) <-chan struct{} {
	if s.probes.holds == nil {
		s.probes.holds = make(chan struct{}, 1)
	}
	return s.probes.holds
}

// ProbesHeld returns how many of s's connections hold a probe's answer.
func ProbesHeld(s *Server) int {
	n := 0
	for _, c := range s.openConns() {
		c.wmu.Lock()
		if c.ackHeld {
			n++
		}
		c.wmu.Unlock()
	}
	return n
}

// SweepProbes runs a sweep of s's held probe answers now.
func SweepProbes(s *Server) { s.sweep() }

// ProbeSweepArmed reports whether a sweep of s's held probe answers is armed.
func ProbeSweepArmed(s *Server) bool { return s.probes.armed.Load() }

// BreakWrites makes every write on s's open connections fail from now on,
// as a write to a socket the client has reset does.
func BreakWrites(s *Server) {
	for _, c := range s.openConns() {
		c.wmu.Lock()
		c.w = brokenWriter{}
		c.wmu.Unlock()
	}
}

// brokenWriter fails every write.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// KeepaliveCounts returns how many keepalive pings s has sent, and how many
// connections it has closed for want of an answer.
func KeepaliveCounts(s *Server) (pings, aborts uint64) {
	return s.ka.pings.Load(), s.ka.aborts.Load()
}

// OnKeepalivePing has s call f after each keepalive ping's write. Call it
// before Serve.
func OnKeepalivePing(s *Server, f func()) { s.ka.sent = f }

// SendWaits returns how many senders waiting for send window were woken
// on s's open connections, and how many wait now.
func SendWaits(s *Server) (woken uint64, waiting int) {
	for _, c := range s.openConns() {
		c.wmu.Lock()
		woken += c.wakes
		c.mu.Lock()
		for _, st := range c.streams {
			if st.waitFor != waitNone {
				waiting++
			}
		}
		c.mu.Unlock()
		c.wmu.Unlock()
	}
	return woken, waiting
}

// ConnLine returns the entries of the lines of senders waiting for the
// connection's window (connWaiters) on s's open connections.
func ConnLine(s *Server) int {
	return sumConns(s, func(c *conn) *sync.Mutex { return &c.wmu }, func(c *conn) int { return len(c.connWaiters) })
}

// sumConns adds up f over s's open connections, each with the lock
// mu(c) held.
func sumConns(s *Server, mu func(*conn) *sync.Mutex, f func(*conn) int) int {
	n := 0
	for _, c := range s.openConns() {
		m := mu(c)
		m.Lock()
		n += f(c)
		m.Unlock()
	}
	return n
}

// OpenConns returns how many connections s serves.
func OpenConns(s *Server) int { return len(s.openConns()) }

// HeldBytes returns what s's open connections hold of the requests they
// received: the messages queued for handlers and those being assembled.
func HeldBytes(s *Server) int64 {
	var n int64
	for _, c := range s.openConns() {
		n += c.queued.Load() + c.assembling.Load()
	}
	return n
}

// OpenStreams returns how many streams s's open connections hold: a
// stream is let go once its handler has ended and its status is written.
func OpenStreams(s *Server) int {
	return sumConns(s, func(c *conn) *sync.Mutex { return &c.mu }, func(c *conn) int { return len(c.streams) })
}
