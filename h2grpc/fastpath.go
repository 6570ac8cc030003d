package h2grpc

import "google.golang.org/grpc/mem"

// InlineReceiver is implemented by this server's streams. A handler reaches
// it by asserting its grpc.ServerStream (unwrapped from
// grpc.GenericServerStream, which hides it) to this interface.
type InlineReceiver interface {
	// SetInline lets the handler take messages on the connection's reader
	// goroutine, without being woken: each complete message that arrives
	// while the handler waits in RecvMsg with nothing queued is passed to
	// fn, undecoded (the codec is bypassed). If fn returns true the message
	// is consumed; if false it is queued for RecvMsg as usual, and messages
	// keep their order either way. msg is only valid during the call.
	//
	// fn runs with the stream's receive lock held and the connection
	// reading nothing else: it must not block, and must not call the
	// stream's methods. Call SetInline from the handler, before its first
	// RecvMsg; nil turns it off.
	SetInline(fn func(msg []byte) bool)
}

var _ InlineReceiver = (*stream)(nil)

// ShrinkMin is the size from which a queued message is offered to the
// handler's shrink function (see Shrinker).
const ShrinkMin = 4 << 10

// Shrinker is implemented by this server's streams, reached as
// InlineReceiver is.
type Shrinker interface {
	// SetShrink lets the handler shrink the messages that wait for it:
	// each complete message of ShrinkMin bytes or more that the stream
	// queues for RecvMsg is passed to fn first, undecoded. If fn returns a
	// shorter encoding, that is queued instead, and the bytes received are
	// freed at once; the stream frees the buffer fn returns (a longer one
	// at once, else once the message is received, or the stream ends), and
	// nil means msg is queued as it is. What fn returns must decode, for
	// the handler, as msg would. A handler busy while its client sends
	// large requests (an Envoy's repeat its node, some 34 KB, most of it a
	// list the server skips) so holds them at the size it will use.
	//
	// fn runs as SetInline's does, under the same rules; msg is only valid
	// during the call. Call SetShrink from the handler, before its first
	// RecvMsg; nil turns it off.
	SetShrink(fn func(msg []byte) mem.Buffer)
}

var _ Shrinker = (*stream)(nil)

// PartsSender is implemented by this server's streams, reached as
// InlineReceiver is.
type PartsSender interface {
	// SendParts sends one message whose encoding is the concatenation of
	// parts, bypassing the codec: a sender that keeps encoded pieces (a
	// header of its own, bodies shared by many streams) sends them without
	// assembling them first. It is SendMsg otherwise; parts are not
	// retained.
	SendParts(parts [][]byte) error
}

var _ PartsSender = (*stream)(nil)

// SetInline implements InlineReceiver.
func (st *stream) SetInline(fn func(msg []byte) bool) {
	st.rmu.Lock()
	st.inline = fn
	st.rmu.Unlock()
}

// SetShrink implements Shrinker.
func (st *stream) SetShrink(fn func(msg []byte) mem.Buffer) {
	st.rmu.Lock()
	st.shrink = fn
	st.rmu.Unlock()
}

// queueShrunkLocked queues msg as the shrink function shrinks it, and
// reports whether it did; if not, msg is for the caller to queue. Call it
// with rmu held.
func (st *stream) queueShrunkLocked(msg []byte) bool {
	if st.shrink == nil || len(msg) < ShrinkMin || st.closed || st.rerr != nil {
		return false
	}
	out := st.shrink(msg)
	if out == nil {
		return false
	}
	if out.Len() >= len(msg) {
		out.Free()
		return false
	}
	st.queue = append(st.queue, out)
	st.addQueuedLocked(queueCost(out.Len()))
	return true
}

// inlineLocked passes msg to the inline receiver if the handler waits with
// nothing queued, and reports whether it took the message. Call it with rmu
// held.
func (st *stream) inlineLocked(msg []byte) bool {
	if st.inline == nil || !st.recvWaiting || len(st.queue) > 0 || st.closed || st.rerr != nil {
		return false
	}
	return st.inline(msg)
}
