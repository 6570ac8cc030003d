package server

import (
	"context"
	"hash/maphash"
	"log/slog"
)

// await records that ts's latest response, nonce, awaits its reply.
func (st *stream) await(ts *typeState, nonce string) {
	if ts.superseded && ts.waiting { // its reply may still come: see recordSupersededReply
		ts.prevNonce, ts.prevVersion = ts.nonce, ts.nonceVersion
	} else {
		ts.prevNonce, ts.prevVersion = "", ""
	}
	ts.nonce, ts.nonceVersion, ts.superseded = nonce, ts.lastVersion, false
	if !ts.waiting {
		ts.waiting = true
		st.srv.awaiting.Add(1)
	}
}

// stopWaiting records that ts's latest response awaits no reply any more:
// it was answered, or the stream ended.
func (st *stream) stopWaiting(ts *typeState) {
	ts.superseded = false
	if ts.waiting {
		ts.waiting = false
		st.srv.awaiting.Add(-1)
	}
}

// recordReply records an ACK or NACK of the type's latest response.
func (st *stream) recordReply(ts *typeState, version, msg string, nack bool) {
	st.stopWaiting(ts)
	st.recordAccepted(ts, nack)
	st.recordOutcome(ts, ts.lastVersion, version, msg, nack)
}

// recordSupersededReply records an ACK or NACK of the response a request
// superseded (see typeState.superseded), which came after the response
// sent in its place: the NACK counts, and is logged and shown, as any.
func (st *stream) recordSupersededReply(ts *typeState, version, msg string, nack bool) {
	if !nack {
		version = ts.prevVersion
	}
	st.recordSupersededAccepted(ts, nack)
	st.recordOutcome(ts, ts.prevVersion, version, msg, nack)
	ts.prevNonce, ts.prevVersion = "", ""
}

// recordOutcome records a NACK of the response of version sent, or an ACK
// of version acked, in the warm gate, the log, the status and the metrics.
func (st *stream) recordOutcome(ts *typeState, sent, acked, msg string, nack bool) {
	if nack {
		st.warm.nack(ts.t)
		msg = nackText(msg)
		// A client may NACK the same version again and again (a SotW TTL
		// refresh sends it every TTL/2): the first of a run is a warning,
		// the rest are counted in the metrics and the status only.
		level := slog.LevelWarn
		if h := nackHash(sent, msg); h == ts.nackLogged {
			level = slog.LevelDebug
		} else {
			ts.nackLogged = h
		}
		st.logger().Log(context.Background(), level, "NACK", "type", ts.t.Short, "rejected_version", sent, "message", msg)
		st.status.nack(ts.t, sent, msg)
		st.srv.metrics.nacks[ts.t.Order].Add(1)
		return
	}
	ts.nackLogged = 0
	st.status.ack(ts.t, acked)
	st.srv.metrics.acks[ts.t.Order].Add(1)
}

var nackSeed = maphash.MakeSeed()

// nackHash identifies a NACK by the version it rejects and its message;
// never 0.
func nackHash(version, msg string) uint64 {
	var h maphash.Hash
	h.SetSeed(nackSeed)
	h.WriteString(version)
	h.WriteByte(0)
	h.WriteString(msg)
	return h.Sum64() | 1
}
