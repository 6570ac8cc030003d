package h2grpc

import (
	"math/rand/v2"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errMaxAge ends the streams of a connection past its age and grace.
var errMaxAge = status.Error(codes.Unavailable, "h2grpc: the connection reached its maximum age; reconnect")

// ageJitter is the part of MaxConnectionAge by which a connection's age
// varies either way, as on grpc-go's servers: connections made in a burst
// do not all go at once.
const ageJitter = 0.1

// jitteredAge returns d, more or less ageJitter of it at random.
func jitteredAge(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*2-1)*ageJitter*float64(d))
}

// startAging arms the connection's age, if the server bounds it. Call it
// once its handshake is done.
func (c *conn) startAging() {
	age := c.srv.opts.MaxConnectionAge
	if age <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ageStopped {
		c.ageTimer = time.AfterFunc(jitteredAge(age), c.ageOut)
	}
}

// ageOut tells the client of a connection past its age to open its next
// streams elsewhere (GOAWAY), and arms the end of its grace.
func (c *conn) ageOut() {
	c.goAwayWith(http2.ErrCodeNo, "max_age")
	grace := c.srv.opts.MaxConnectionAgeGrace
	if grace <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ageStopped {
		c.ageTimer = time.AfterFunc(grace, c.endStreams)
	}
}

// endStreams ends every stream of the connection with UNAVAILABLE, in
// trailers, so that their clients call again (on a new connection); the
// connection, which sent GOAWAY, closes as the last handler returns. A
// stream with a message part sent, the rest waiting for window, cannot end
// so: its client would read the trailers as the end of a message cut
// short, an error of its own rather than UNAVAILABLE. If there is one, the
// connection is closed once the other streams' trailers are written, as
// grpc-go's server closes a connection at the end of its grace: the
// client's calls on it fail UNAVAILABLE.
func (c *conn) endStreams() {
	cut := false
	for _, st := range c.openStreams(false) {
		c.wmu.Lock()
		if st.partial && !st.done {
			cut = true
		} else {
			st.writeStatusLocked(errMaxAge)
		}
		c.wmu.Unlock()
		st.reset(errMaxAge)
	}
	if cut {
		c.raw.Close()
	}
}

// stopAging disarms the connection's age: it is closing.
func (c *conn) stopAging() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ageStopped = true
	if c.ageTimer != nil {
		c.ageTimer.Stop()
	}
}
