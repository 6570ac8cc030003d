package h2grpc

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
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
// handshake is done. The bytes a connection's client takes count as a sign
// of life too: a long send holds up the reader (it waits for wmu to answer
// the client's frames), and a ping may sit behind a backlog in the socket,
// so a client that reads a large response slowly would otherwise be
// called dead. So once a connection is due a ping, each look until it
// reads again also reads its progress (connAlive.progress: on Linux, the bytes
// the client's TCP has acknowledged, which stops when the client stops
// reading and its receive buffer is full; elsewhere the bytes the socket
// has taken, which moves only as writes are woken), and a change puts off
// the ping, or the wait for its answer. (The client's TCP acknowledging
// the ping itself so puts off that wait by a look.) A connection that was
// due a ping when its writes were under way (wmu held) is pinged at a
// later look, and aborted after KeepaliveTime and KeepaliveTimeout with no
// sign of life: a send stuck on a client that does not read.
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
	started atomic.Bool     // the handshake is done; set by the reader
	alive   atomic.Bool     // a read got bytes since the check last looked; set by the reader
	sent    atomic.Uint64   // bytes the socket has taken; counted by the writers
	rc      syscall.RawConn // the raw connection's socket, for its progress; nil if none; set before started
	// The check's only:
	idle     time.Time // the last sign of life: a read, or progress (zero: not looked at yet)
	pinged   time.Time // when it was pinged, or made progress since; zero if no ping is out
	progress uint64    // the progress last read (see keepalive), if watched
	watched  bool      // progress holds a reading
	ended    bool      // the check aborted it, or found it closing
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
		if err == nil && n == 0 {
			err = io.ErrShortWrite
		}
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
		if a.ended || !a.started.Load() {
			continue
		}
		if a.alive.Swap(false) || a.idle.IsZero() {
			a.idle, a.pinged, a.watched = now, time.Time{}, false
			continue
		}
		if !a.watched && now.Sub(a.idle) < s.opts.KeepaliveTime {
			continue // (once watched, watched at every look until it reads)
		}
		if p := c.progress(); !a.watched || p != a.progress {
			if a.watched { // the client took bytes: alive
				a.idle = now
				if !a.pinged.IsZero() {
					a.pinged = now
				}
			}
			a.progress, a.watched = p, true
		}
		switch {
		case !a.pinged.IsZero():
			if now.Sub(a.pinged) >= timeout {
				s.abortIdle(c, now, "keepalive ping not answered")
			}
		case now.Sub(a.idle) < s.opts.KeepaliveTime:
		case c.wmu.TryLock():
			if c.werr != nil { // closing
				c.wmu.Unlock()
				a.ended = true
				continue
			}
			a.pinged = now
			s.pingLocked(c)
		case now.Sub(a.idle) >= s.opts.KeepaliveTime+timeout: // a write under way all along
			s.abortIdle(c, now, "a write has made no progress, and nothing was read")
		}
	}
}

// progress is how far c's client has got with what the server wrote: the
// bytes its TCP has acknowledged, where the socket tells (tcpAcked), else
// the bytes the socket has taken.
func (c *conn) progress() uint64 {
	if n, ok := tcpAcked(c.ka.rc); ok {
		return n
	}
	return c.ka.sent.Load()
}

// abortIdle aborts c, idle since c.ka.idle, for why, counting a goroutine
// that closes it, if any, with the check's own count, which the check
// holds (Close waits for the reader and the writers, which it wakes, and
// a connection that is TLS itself says goodbye first, which may wait).
func (s *Server) abortIdle(c *conn, now time.Time, why string) {
	s.opts.Logger.Debug("h2grpc: closing the connection: "+why,
		"peer", c.raw.RemoteAddr().String(), "idle", now.Sub(c.ka.idle).Round(time.Millisecond))
	c.ka.ended = true
	s.ka.aborts.Add(1)
	c.abortOn(&s.ka.wg)
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
