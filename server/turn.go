package server

import (
	"errors"
	"io"
	"time"
)

// serve runs the stream on the handler's goroutine: it receives requests
// and handles each in a turn. A goroutine of the waker's takes the turns
// that publications and timers call for, so that an idle stream has no
// goroutine of its own but this one, blocked in recv. A send error ends the
// gRPC stream (grpc-go writes its status), which makes recv fail.
func serve[Req any](st *stream, recv func() (Req, error), handle func(Req) error) error {
	st.waker.fn = st.wakeUp
	defer st.close()
	for {
		req, err := recv()
		if err != nil {
			if failed := st.failure(); failed != nil {
				err = failed
			} else if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		err = st.turn(func() error { return handle(req) })
		if r, ok := any(req).(interface{ Release() }); ok {
			r.Release() // the request's bytes go back to gRPC's pool
		}
		if err != nil {
			return err
		}
	}
}

// wakeUp takes a turn for a publication or a timer, or, if a turn is
// running, leaves it to that one to take another when it ends.
func (st *stream) wakeUp() {
	st.gate.Lock()
	if st.busy {
		st.pending = true
		st.gate.Unlock()
		return
	}
	st.busy = true
	st.gate.Unlock()
	st.mu.Lock()
	_ = st.turnLocked(nil) // a failure is kept in st.failed
	st.endTurn()
}

// endTurn ends a turn, whose goroutine holds mu and made the stream busy:
// it first takes the turns wake-ups asked for meanwhile.
func (st *stream) endTurn() {
	for {
		st.gate.Lock()
		if !st.pending || st.handlerWaits {
			st.busy, st.pending = false, false
			st.turnEnded.Signal() // the handler, if it waits
			st.gate.Unlock()
			st.mu.Unlock()
			return
		}
		st.pending = false
		st.gate.Unlock()
		_ = st.turnLocked(nil)
	}
}

// failure returns the error a turn met, if any.
func (st *stream) failure() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.failed
}

// turn handles one event under the stream's lock: it runs handle (if any),
// adopts a new snapshot, opens the warm gate if it timed out, sends
// heartbeats that are due, then pushes what the state calls for. An error
// fails the stream for good.
func (st *stream) turn(handle func() error) error {
	st.gate.Lock()
	for st.busy {
		st.handlerWaits = true
		st.turnEnded.Wait()
	}
	st.busy, st.handlerWaits = true, false
	st.gate.Unlock()
	st.mu.Lock()
	err := st.turnLocked(handle)
	st.endTurn()
	return err
}

// turnLocked is turn's work; st.mu is held.
func (st *stream) turnLocked(handle func() error) error {
	if st.failed != nil {
		return st.failed
	}
	if st.closed { // nothing is sent, or awaited, after close
		return nil
	}
	err := st.step(handle)
	if err != nil {
		st.failed = err
	}
	return err
}

func (st *stream) step(handle func() error) error {
	if handle != nil {
		if err := handle(); err != nil {
			if !isRefusal(err) { // logged, at a bounded rate, as it was refused
				st.logger().Warn("closing stream", "error", err)
			}
			return err
		}
	}
	if st.watcher != nil && st.watcher.HasNews() {
		st.takeSnapshot()
	}
	now := time.Now()
	if st.warm.due(now) {
		st.warm.clear()
	}
	if st.hb.due(now) {
		if err := st.sendHeartbeats(); err != nil {
			return st.sendFailed(err)
		}
	}
	if err := st.sendDueBeats(true); err != nil {
		return st.sendFailed(err)
	}
	if err := st.push(); err != nil {
		return st.sendFailed(err)
	}
	if err := st.sendDueBeats(false); err != nil {
		return st.sendFailed(err)
	}
	st.publishedAt = time.Time{} // later responses answer requests, not the publication
	st.rearmHeartbeat()
	return nil
}

// sendFailed logs a failed send, which most often means the client has
// gone, and returns err.
func (st *stream) sendFailed(err error) error {
	st.logger().Debug("stream ends: a send failed", "error", err)
	return err
}

// takeSnapshot adopts the watcher's latest snapshot and marks what changed.
func (st *stream) takeSnapshot() {
	snap, pending, at := st.watcher.Take()
	st.snap, st.publishedAt = snap, at
	st.names.Store(snap)
	for _, ts := range st.types.list {
		if pending.All {
			ts.reeval = true
			continue
		}
		for _, ch := range pending.Changes {
			ts.markDirty(ch[ts.t])
		}
	}
}
