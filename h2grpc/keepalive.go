package h2grpc

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// keepalivePing is the data of the server's keepalive PINGs.
var keepalivePing = [8]byte{'k', 'e', 'e', 'p', 'a', 'l', 'v', 'e'}

// keepalive is the server's check that its clients are alive
// (Options.KeepaliveTime and KeepaliveTimeout): one goroutine per server,
// started by the first Serve, that looks at every open connection a few
// times per period, rather than a timer per connection that every read
// would have to move. A connection's reader marks it alive when a read
// gets bytes (connAlive.alive); the check clears the mark, pings a
// connection that has read nothing for KeepaliveTime, and aborts one that
// has read nothing for KeepaliveTimeout since its ping.
//
// The check never waits for a connection, and looks only at those whose
// handshake is done. A connection that is due a ping (or has one out) and
// whose writes it finds under way (wmu held) is judged by them instead:
// while the socket takes bytes (connAlive.sent), the client is reading,
// and its ping waits for a later look; a write that has made no progress
// at any look for KeepaliveTimeout, a send stuck on a client that does not
// read, aborts it. (A long send also holds up the reader, which waits for
// wmu to answer the client's frames, so reads alone would call a client
// that reads a large response slowly dead.)
//
// The check writes the ping itself when the socket takes it at once, as it
// nearly always does (after a fan-out, every client falls due at the same
// look, and a goroutine each would be a burst of stacks); otherwise (a
// full socket, or TLS, which cannot write without waiting) a goroutine of
// its own finishes the write, holding wmu until it is done, and an abort
// wakes it.
//
// Locking: started and stop are guarded by Server.mu; wg counts the loop
// and the pings it writes.
type keepalive struct {
	started bool
	stop    chan struct{} // closed to end the loop
	wg      sync.WaitGroup
	pings   atomic.Uint64 // pings written
	aborts  atomic.Uint64 // connections closed for want of an answer
	sent    func()        // if set (by tests, before Serve), called after each ping's write
}

// connAlive is a connection's state for the keepalive check.
type connAlive struct {
	started atomic.Bool   // the handshake is done; set by the reader
	alive   atomic.Bool   // a read got bytes since the check last looked; set by the reader
	sent    atomic.Uint64 // bytes the socket has taken; counted by the writers
	// The check's only:
	idle     time.Time // since when it has been found idle (zero: not looked at yet)
	pinged   time.Time // when it was pinged (or its writes last moved since); zero if no ping is out
	busy     time.Time // when its writes were last found to have moved; zero unless found under way
	busySent uint64    // sent then
	ended    bool      // the check aborted it
}

// markAlive records that a read got bytes: a load, and a store only after
// the check has looked.
func (a *connAlive) markAlive() {
	if !a.alive.Load() {
		a.alive.Store(true)
	}
}

// aliveReader is a connection that marks alive each read that gets bytes.
type aliveReader struct {
	r     io.Reader
	alive *connAlive
}

func (r aliveReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		r.alive.markAlive()
	}
	return n, err
}

// sentConn is a connection that counts the bytes its writes take, in
// writes of at most sentChunk, so that a long write shows its progress.
type sentConn struct {
	net.Conn
	sent *atomic.Uint64
}

// sentChunk bounds sentConn's writes to the connection under it.
const sentChunk = 64 << 10

func (c sentConn) Write(b []byte) (int, error) {
	total := 0
	for len(b) > 0 {
		n, err := c.Conn.Write(b[:min(len(b), sentChunk)])
		c.sent.Add(uint64(n))
		total += n
		b = b[n:]
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// keepaliveTick is how often the check looks at every connection: a
// quarter of the shorter of the two periods, so that a ping goes out
// within a quarter of KeepaliveTime late, and an abort as much after
// KeepaliveTimeout.
func (o *Options) keepaliveTick() time.Duration {
	return max(min(o.KeepaliveTime, o.KeepaliveTimeout)/4, time.Millisecond)
}

// startKeepaliveLocked starts the keepalive check, unless it is off or
// running. Call it with mu held.
func (s *Server) startKeepaliveLocked() {
	if s.opts.KeepaliveTime < 0 || s.ka.started {
		return
	}
	s.ka.started = true
	s.ka.stop = make(chan struct{})
	s.ka.wg.Add(1)
	go s.keepaliveLoop(s.ka.stop)
}

// stopKeepalive ends the keepalive check and waits for it and its pings
// (once the connections are closed, a ping's write fails at once).
func (s *Server) stopKeepalive() {
	s.mu.Lock()
	if s.ka.started && s.ka.stop != nil {
		close(s.ka.stop)
		s.ka.stop = nil
	}
	s.mu.Unlock()
	s.ka.wg.Wait()
}

// keepaliveLoop runs the check until stop is closed.
func (s *Server) keepaliveLoop(stop <-chan struct{}) {
	defer s.ka.wg.Done()
	t := time.NewTicker(s.opts.keepaliveTick())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.checkAlive(now)
		}
	}
}

// checkAlive looks at every open connection at now.
func (s *Server) checkAlive(now time.Time) {
	timeout := s.opts.KeepaliveTimeout
	for _, c := range s.openConns() {
		a := &c.ka
		switch {
		case a.ended || !a.started.Load():
		case a.alive.Swap(false) || a.idle.IsZero():
			a.idle, a.pinged, a.busy = now, time.Time{}, time.Time{}
		case a.pinged.IsZero() && now.Sub(a.idle) < s.opts.KeepaliveTime:
		case !c.wmu.TryLock(): // a write under way
			if sent := a.sent.Load(); a.busy.IsZero() || sent != a.busySent {
				a.busy, a.busySent = now, sent
				if !a.pinged.IsZero() {
					a.pinged = now // the client reads: give it time to answer
				}
			} else if now.Sub(a.busy) >= timeout {
				s.abortIdle(c, now, "a write has made no progress, and nothing was read")
			}
		case a.pinged.IsZero():
			a.pinged, a.busy = now, time.Time{}
			s.pingLocked(c)
		default:
			c.wmu.Unlock()
			a.busy = time.Time{}
			if now.Sub(a.pinged) >= timeout {
				s.abortIdle(c, now, "keepalive ping not answered")
			}
		}
	}
}

// abortIdle aborts c, idle since c.ka.idle, for why: it shuts the socket
// down both ways, or closes it (the check holds no lock, so Close may wait
// for the reader and the writers, which it wakes).
func (s *Server) abortIdle(c *conn, now time.Time, why string) {
	s.opts.Logger.Debug("h2grpc: closing the connection: "+why,
		"peer", c.raw.RemoteAddr().String(), "idle", now.Sub(c.ka.idle).Round(time.Millisecond))
	c.ka.ended = true
	s.ka.aborts.Add(1)
	if !c.shutdownSocket() {
		c.raw.Close()
	}
}

// pingLocked writes a keepalive PING on c, whose wmu the caller holds, and
// unlocks it: at once if the socket takes the frame, else on a goroutine
// of its own.
func (s *Server) pingLocked(c *conn) {
	c.wbuf = appendPing(c.bufLocked(), 0, keepalivePing[:])
	if done, err := c.flush(true); done {
		c.wmu.Unlock()
		s.pinged(err)
		return
	}
	s.ka.wg.Add(1)
	go func() {
		defer s.ka.wg.Done()
		err := c.flushLocked()
		c.wmu.Unlock()
		s.pinged(err)
	}()
}

// pinged counts a ping written (err nil), and tells a test.
func (s *Server) pinged(err error) {
	if err != nil {
		return
	}
	s.ka.pings.Add(1)
	if s.ka.sent != nil {
		s.ka.sent()
	}
}
