package client

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/resource"
)

// stream is one xDS stream to the server (the ADS stream, or one per-type
// stream) with its protocol state, across reconnections. Its goroutine,
// run, owns that state; Watch, cancel functions, timers and other streams
// reach it only by post.
type stream struct {
	// Read-only after newStream.
	c      *Client
	method string
	delta  bool
	done   chan struct{} // closed when run returns
	kick   chan struct{} // capacity 1: wakes run to take events

	mu     sync.Mutex // guards events
	events []func()   // run on the stream's goroutine, in order

	// Owned by run's goroutine.
	types          map[string]*typeState
	conn           *conn // nil while disconnected
	retry          int   // consecutive failed attempts
	outageReported bool  // the current outage has been reported to watchers
}

// conn is one attempt of a stream: the transport stream and its receive
// goroutine. Owned by the stream's goroutine.
type conn struct {
	st       Stream
	cancel   context.CancelFunc
	recv     chan recvResult // unbuffered; the receive goroutine sends
	done     chan struct{}   // closed when the receive goroutine returns
	nodeSent bool
	received bool // at least one response arrived
}

type recvResult struct {
	msg []byte
	err error
}

func newStream(c *Client, method string) *stream {
	s := &stream{
		c:      c,
		method: method,
		delta:  c.cfg.Delta,
		done:   make(chan struct{}),
		kick:   make(chan struct{}, 1),
		types:  make(map[string]*typeState),
	}
	go s.run(c.ctx)
	return s
}

// post queues f to run on the stream's goroutine. It never blocks; after
// the stream stops, f is dropped.
func (s *stream) post(f func()) {
	s.mu.Lock()
	s.events = append(s.events, f)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *stream) runEvents() {
	s.mu.Lock()
	evs := s.events
	s.events = nil
	s.mu.Unlock()
	for _, f := range evs {
		f()
	}
}

// run owns the stream: it connects, reconnects with backoff, and handles
// events and responses until ctx ends.
func (s *stream) run(ctx context.Context) {
	defer close(s.done)
	defer s.shutdown()
	var backoff <-chan time.Time
	for {
		if s.conn == nil && backoff == nil && len(s.types) > 0 {
			if err := s.connect(ctx); err != nil && ctx.Err() == nil {
				backoff = s.failed(err)
			}
		}
		var recv <-chan recvResult
		if s.conn != nil {
			recv = s.conn.recv
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			s.runEvents()
			s.collect()
			s.flush()
		case <-backoff:
			backoff = nil
		case r := <-recv:
			if isUnusable(r.err) { // a file that cannot be used (C7)
				s.reportUnusable(r.err)
				break
			}
			if r.err == nil {
				s.conn.received = true
				s.outageReported = false
				r.err = s.handle(r.msg)
				if r.err == nil {
					s.flush() // dependents it dropped or took back (C3)
				}
			}
			if r.err != nil {
				if ctx.Err() != nil {
					return
				}
				got := s.conn.received
				s.disconnect()
				if got {
					s.retry = 0
				}
				backoff = s.failed(r.err)
			}
		}
	}
}

// failed reports a failed attempt and returns the backoff timer for the
// count of attempts, which the caller resets after a stream that received
// responses (so that it waits Backoff(0)).
func (s *stream) failed(err error) <-chan time.Time {
	if !s.outageReported {
		s.outageReported = true
		err = fmt.Errorf("client: xDS stream %s to %s: %w", s.method, s.c.cfg.Server, err)
		for _, ts := range s.types {
			for _, w := range ts.allWatchers() {
				w.error(err)
			}
		}
	}
	d := s.c.cfg.Backoff(s.retry)
	s.retry++
	t := time.NewTimer(d)
	return t.C
}

// connect opens a stream and sends the subscriptions of every type.
func (s *stream) connect(ctx context.Context) error {
	cctx, cancel := context.WithCancel(ctx)
	st, err := s.c.transport.NewStream(cctx, s.method)
	if err != nil {
		cancel()
		return err
	}
	cn := &conn{st: st, cancel: cancel, recv: make(chan recvResult), done: make(chan struct{})}
	go cn.receive(cctx)
	s.conn = cn
	for _, ts := range s.sortedTypes() {
		ts.resetConn()
		s.sendSubscription(ts)
	}
	return nil
}

func (cn *conn) receive(ctx context.Context) {
	defer close(cn.done)
	for {
		msg, err := cn.st.Recv()
		select {
		case cn.recv <- recvResult{msg, err}:
		case <-ctx.Done():
			return
		}
		if err != nil && !isUnusable(err) {
			return
		}
	}
}

// disconnect ends the current stream and stops the watch expiry timers:
// they start again when the subscriptions are sent on the next stream.
func (s *stream) disconnect() {
	cn := s.conn
	s.conn = nil
	cn.cancel()
	<-cn.done
	for _, ts := range s.types {
		for _, rs := range ts.res {
			rs.stopExpiry()
		}
	}
}

func (s *stream) shutdown() {
	if s.conn != nil {
		s.disconnect()
	}
	for _, ts := range s.types {
		for _, rs := range ts.res {
			rs.stopExpiry()
			rs.stopTTL()
		}
	}
}

// send encodes and sends a request on the current stream. A failed send
// is not an error here: the receive goroutine reports the stream's end.
func (s *stream) send(encode func(first bool) ([]byte, error)) {
	if s.conn == nil {
		return
	}
	b, err := encode(!s.conn.nodeSent)
	if err != nil {
		return
	}
	s.conn.nodeSent = true
	_ = s.conn.st.Send(b)
}

// flush sends the subscription of every type whose watched names changed.
func (s *stream) flush() {
	if s.conn == nil {
		return
	}
	for _, ts := range s.sortedTypes() {
		if ts.subscriptionChanged(s.delta) {
			s.sendSubscription(ts)
		}
	}
}

// sortedTypes returns the types in ADS order (clusters first), then
// unknown types by URL, so requests go out in a stable order.
func (s *stream) sortedTypes() []*typeState {
	out := make([]*typeState, 0, len(s.types))
	for _, ts := range s.types {
		out = append(out, ts)
	}
	order := func(url string) int {
		if t := resource.Lookup(url); t != nil {
			return t.Order
		}
		return 1 << 20
	}
	sort.Slice(out, func(i, j int) bool {
		oi, oj := order(out[i].info.url), order(out[j].info.url)
		if oi != oj {
			return oi < oj
		}
		return strings.Compare(out[i].info.url, out[j].info.url) < 0
	})
	return out
}

// handle decodes and applies one response.
func (s *stream) handle(msg []byte) error {
	if s.delta {
		return s.handleDelta(msg)
	}
	return s.handleSotW(msg)
}

// sendSubscription sends a type's current subscription: on a new stream
// its first request (C5), afterwards a change of names.
func (s *stream) sendSubscription(ts *typeState) {
	if s.delta {
		s.sendDeltaSubscription(ts)
	} else {
		s.sendSotW(ts, nil)
	}
	s.startExpiry(ts)
}
