package h2grpc

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// stream is one gRPC call, a grpc.ServerStream for its handler.
//
// Locking: rmu guards the receive side (the fields after it down to
// shrink); the connection's wmu guards the send side (sendWin to waitFor),
// and is wcond's lock.
// rmu is never held while taking wmu's writes; finish takes rmu under wmu.
// wmu also guards header and trailer, which the handler sets and a send on
// any goroutine may write.
type stream struct {
	c      *conn
	id     uint32
	m      *method
	path   string
	ctx    context.Context
	cancel context.CancelFunc

	header, trailer metadata.MD

	rmu        sync.Mutex
	prefix     [5]byte // the message prefix being read
	prefixN    int
	msg        *[]byte      // the message being read, or nil; grown as its bytes come (see growMsgLocked)
	msgN       int          // its bytes read
	msgSize    int          // its size, as its prefix says
	queue      []mem.Buffer // received messages the handler has not taken
	queued     int          // their cost: see queueCost
	recvWin    int32        // what the client may still send on the stream
	unacked    int32        // bytes received and not yet credited back
	halfClosed bool         // the client ended its side
	rstSent    bool         // the server reset the stream: frames in flight are ignored
	contentLen int64        // the request's content-length, or -1
	dataLen    int64        // the DATA payload received, padding left out
	closed     bool         // the handler ended: received data is dropped
	rerr       error        // after the queue: io.EOF, or why the stream failed
	ready      chan struct{}
	// recvWaiting is set while the handler waits in RecvMsg with nothing
	// queued: a message may then go to inline (see InlineReceiver).
	recvWaiting bool
	inline      func([]byte) bool
	shrink      func([]byte) mem.Buffer // see Shrinker

	sendWin     int64
	headersSent bool
	// partial says a message is part written: the rest waits for window,
	// and trailers written now would cut it short (see conn.endStreams).
	partial bool
	done    bool // trailers sent or stream reset: no more frames
	doneErr error
	wcond   sync.Cond // the stream's sender waits on it for window: see waitWindowLocked
	waitFor uint8     // what the sender waits for: waitNone, waitStream or waitConn
	inLine  bool      // the stream has an entry in the connection's connWaiters
}

// What a stream's sender waits for (stream.waitFor).
const (
	waitNone   = iota
	waitStream // the stream's send window
	waitConn   // the connection's send window, in its connWaiters
)

// newStream makes the stream a request's headers open; an error is the
// status to refuse it with.
func (c *conn) newStream(f *http2.MetaHeadersFrame) (*stream, error) {
	if m := f.PseudoValue("method"); m != "POST" {
		return nil, status.Errorf(codes.Unimplemented, "h2grpc: method %q is not POST", m)
	}
	path := f.PseudoValue("path")
	m := c.srv.methods[path]
	if m == nil {
		return nil, status.Errorf(codes.Unimplemented, "unknown method %s", path)
	}
	ctx := c.withPeer(context.Background())
	md := metadata.MD{}
	if a := f.PseudoValue("authority"); a != "" {
		md[":authority"] = []string{a}
	}
	var timeout string
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "content-type":
			if ct := hf.Value; ct != "application/grpc" && !strings.HasPrefix(ct, "application/grpc+") && !strings.HasPrefix(ct, "application/grpc;") {
				return nil, status.Errorf(codes.Unknown, "h2grpc: content-type %q is not gRPC", ct)
			}
		case "grpc-encoding":
			if hf.Value != "identity" {
				return nil, status.Errorf(codes.Unimplemented, "h2grpc: compression %q is not supported", hf.Value)
			}
		case "grpc-timeout":
			timeout = hf.Value
		default:
			if isReserved(hf.Name) {
				continue
			}
			v := hf.Value
			if strings.HasSuffix(hf.Name, "-bin") {
				b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
				if err != nil {
					return nil, status.Errorf(codes.Internal, "h2grpc: malformed binary header %q", hf.Name)
				}
				v = string(b)
			}
			md[hf.Name] = append(md[hf.Name], v)
		}
	}
	st := &stream{c: c, id: f.StreamID, m: m, path: path, recvWin: c.srv.opts.InitialWindowSize,
		ready: make(chan struct{}, 1)}
	st.wcond.L = &c.wmu
	st.contentLen, _ = contentLength(f) // -1 if none; malformed refused one not valid
	ctx = grpc.NewContextWithServerTransportStream(metadata.NewIncomingContext(ctx, md), transportStream{st})
	if timeout != "" {
		d, ok := decodeTimeout(timeout)
		if !ok {
			return nil, status.Errorf(codes.Internal, "h2grpc: malformed grpc-timeout %q", timeout)
		}
		st.ctx, st.cancel = context.WithTimeout(ctx, d)
		context.AfterFunc(st.ctx, st.expire)
	} else {
		st.ctx, st.cancel = context.WithCancel(ctx)
	}
	c.wmu.Lock()
	st.sendWin = c.initWin
	c.wmu.Unlock()
	return st, nil
}

// run runs the handler on its own goroutine, then ends the stream with its
// result.
func (st *stream) run() {
	var err error
	if h := st.m.stream; h != nil {
		err = h(st.m.impl, st)
	} else {
		var resp any
		resp, err = st.m.unary(st.m.impl, st.ctx, st.recvRequest, nil)
		if err == nil {
			err = st.SendMsg(resp)
		}
	}
	st.finish(err)
}

// recvRequest reads a unary call's request.
func (st *stream) recvRequest(m any) error {
	err := st.RecvMsg(m)
	if errors.Is(err, io.EOF) {
		return status.Error(codes.Internal, "h2grpc: the client sent no request message")
	}
	return err
}

// onData takes a DATA frame's payload (n bytes of window, padding
// included); end reports that the client ended its side. It runs on the
// connection's goroutine.
func (st *stream) onData(data []byte, n int32, end bool) error {
	credit, err := st.take(data, n, end)
	if credit > 0 {
		return st.c.writeWindowUpdates(0, st, credit)
	}
	return err
}

// take is onData but for the window it returns to credit back to the
// client, for the caller to write.
func (st *stream) take(data []byte, n int32, end bool) (int32, error) {
	st.rmu.Lock()
	if st.rstSent {
		st.rmu.Unlock()
		return 0, nil
	}
	if st.halfClosed {
		st.rmu.Unlock()
		return 0, http2.StreamError{StreamID: st.id, Code: http2.ErrCodeStreamClosed}
	}
	if n > st.recvWin {
		st.rmu.Unlock()
		return 0, http2.StreamError{StreamID: st.id, Code: http2.ErrCodeFlowControl}
	}
	if st.contentLen >= 0 { // RFC 9113 §8.1.1: a content-length that the DATA do not add up to
		if st.dataLen += int64(len(data)); st.dataLen > st.contentLen || end && st.dataLen != st.contentLen {
			st.rmu.Unlock()
			return 0, http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
		}
	}
	st.recvWin -= n
	st.unacked += n
	queued, failed := len(st.queue), st.rerr != nil
	if st.rerr == nil && !st.closed {
		st.assembleLocked(data)
	}
	if end {
		st.halfClosed = true
		if st.rerr == nil {
			st.rerr = io.EOF
		}
	}
	wake := len(st.queue) > queued || (st.rerr != nil && !failed) // not if all went inline
	credit := st.creditLocked()
	st.rmu.Unlock()
	if wake {
		st.notify()
	}
	return credit, nil
}

// assembleLocked cuts data into gRPC messages and passes each complete one
// inline or queues it (see InlineReceiver). Call it with rmu held.
func (st *stream) assembleLocked(data []byte) {
	pool := &msgBufs
	tried := false // the message being read was offered inline and to shrink whole, and refused
	for len(data) > 0 {
		if st.msg == nil && st.prefixN == 0 && (st.inline != nil || st.shrink != nil) && len(data) >= len(st.prefix) && data[0] == 0 {
			// A message whole in this frame goes inline, or is shrunk,
			// without a copy.
			size := int(binary.BigEndian.Uint32(data[1:]))
			if end := len(st.prefix) + size; end <= len(data) && size <= st.c.srv.opts.MaxRecvMsgSize {
				if msg := data[len(st.prefix):end]; st.inlineLocked(msg) || st.queueShrunkLocked(msg) {
					data = data[end:]
					continue
				}
				tried = true
			}
		}
		if st.msg == nil {
			k := copy(st.prefix[st.prefixN:], data)
			st.prefixN += k
			data = data[k:]
			if st.prefixN < len(st.prefix) {
				return
			}
			st.prefixN = 0
			if st.prefix[0] != 0 {
				st.rerr = status.Error(codes.Internal, "h2grpc: compressed message without grpc-encoding")
				return
			}
			size := int(binary.BigEndian.Uint32(st.prefix[1:]))
			if max := st.c.srv.opts.MaxRecvMsgSize; size > max {
				st.c.srv.stats.tooLarge.Add(1)
				st.c.logRefusal("a message larger than MaxRecvMsgSize", st.id)
				st.rerr = status.Errorf(codes.ResourceExhausted, "h2grpc: received message larger than max (%d vs. %d)", size, max)
				return
			}
			// A buffer for the first part only: a prefix that claims
			// megabytes reserves nothing until they come.
			st.msg, st.msgN, st.msgSize = allocMsg(min(size, msgFirstPart)), 0, size
			st.c.assembling.Add(int64(cap(*st.msg)))
			if size == 0 {
				st.queue = append(st.queue, mem.SliceBuffer(nil))
				st.addQueuedLocked(queueCost(0))
				st.msg, tried = nil, false
				continue
			}
		}
		if want := min(st.msgN+len(data), st.msgSize); want > len(*st.msg) && !st.growMsgLocked(want) {
			st.freeMsgLocked()
			st.rerr = status.Errorf(codes.ResourceExhausted, "h2grpc: more than %d bytes of messages being received on the connection (the server's MaxConnAssemblingBytes)", st.c.srv.opts.MaxConnAssemblingBytes)
			st.c.srv.stats.assemblingRefused.Add(1)
			st.c.logRefusal("a message: its connection's messages being received would pass MaxConnAssemblingBytes", st.id)
			return
		}
		k := copy((*st.msg)[st.msgN:], data)
		st.msgN += k
		data = data[k:]
		if st.msgN == st.msgSize {
			if !tried && st.inlineLocked(*st.msg) {
				st.dropLocked() // frees st.msg; the queue is empty
			} else if !tried && st.queueShrunkLocked(*st.msg) {
				st.freeMsgLocked()
			} else {
				st.c.assembling.Add(-int64(cap(*st.msg))) // the queue's now: see queued
				st.queue = append(st.queue, mem.NewBuffer(st.msg, pool))
				st.addQueuedLocked(queueCost(st.msgN))
			}
			st.msg, tried = nil, false
		}
	}
}

// queueEntryCost is what a queued message costs at least, whatever its
// size: its place in the queue and its buffer's header.
const queueEntryCost = 64

// queueCost is what a queued message of n bytes counts against the
// stream's window (see creditLocked): its bytes, and at least
// queueEntryCost, so that a client sending empty messages (or messages
// that shrink to nothing, see Shrinker) to a busy handler cannot queue
// without bound.
func queueCost(n int) int { return max(n, queueEntryCost) }

// joinable returns how many bytes of data the stream takes in one onData
// as it would frame by frame: no more than its window, nor more than keeps
// what it has queued within a window, past which it stops crediting the
// client back (see creditLocked), which frame by frame it might have done
// partway.
func (st *stream) joinable() int64 {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	return min(int64(st.recvWin), int64(st.c.srv.opts.InitialWindowSize)-int64(st.queued))
}

// endsNoMessage reports whether n bytes of the stream's data, which start
// with head, would end no message: they all go to one that goes on past
// them, so that handling them later holds up no request.
func (st *stream) endsNoMessage(head []byte, n int) bool {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	switch {
	case st.rerr != nil || st.closed:
		return false
	case st.msg != nil:
		return st.msgSize-st.msgN > n
	case st.prefixN > 0 || len(head) < len(st.prefix) || head[0] != 0:
		return false
	}
	size := int(binary.BigEndian.Uint32(head[1:]))
	return size <= st.c.srv.opts.MaxRecvMsgSize && len(st.prefix)+size > n
}

// creditLocked returns the bytes to credit back to the client now, if any:
// those received and not credited back, but for what the queue holds for
// the handler, once they are a quarter of the window. What waits for the
// handler is not credited back until it takes it, so that the stream's
// queue and what the client may still send add up to a window at most
// (and a message larger than the window once, whose bytes are credited as
// they come, while it is being assembled: see
// Options.MaxConnAssemblingBytes).
func (st *stream) creditLocked() int32 {
	w := st.c.srv.opts.InitialWindowSize
	n := int64(st.unacked) - int64(st.queued)
	if n < int64(w/4) {
		return 0
	}
	st.recvWin += int32(n)
	st.unacked -= int32(n)
	return int32(n)
}

// addQueuedLocked adds n (negative: takes) to what the stream's queue
// costs, and to the connection's count of it. Call it with rmu held.
func (st *stream) addQueuedLocked(n int) {
	st.queued += n
	st.c.queued.Add(int64(n))
}

func (st *stream) notify() {
	select {
	case st.ready <- struct{}{}:
	default:
	}
}

// Context returns the stream's context: the call's metadata, peer and
// deadline; it is cancelled when the call ends.
func (st *stream) Context() context.Context { return st.ctx }

// RecvMsg receives the next request into m; io.EOF once the client has
// ended its side.
func (st *stream) RecvMsg(m any) error {
	for {
		st.rmu.Lock()
		st.recvWaiting = false
		if len(st.queue) > 0 {
			b := st.queue[0]
			st.queue = slices.Delete(st.queue, 0, 1)
			st.addQueuedLocked(-queueCost(b.Len()))
			credit := st.creditLocked()
			st.rmu.Unlock()
			if connCredit := st.c.connCredit(); credit > 0 || connCredit > 0 {
				_ = st.c.writeWindowUpdates(connCredit, st, credit) // a failure fails the connection, and this stream
			}
			err := st.c.srv.opts.Codec.Unmarshal(mem.BufferSlice{b}, m)
			b.Free()
			if err != nil {
				return status.Errorf(codes.Internal, "h2grpc: failed to unmarshal the received message: %v", err)
			}
			return nil
		}
		err := st.rerr
		st.recvWaiting = err == nil
		st.rmu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-st.ready:
		case <-st.ctx.Done():
			st.rmu.Lock()
			st.recvWaiting = false
			st.rmu.Unlock()
			return status.FromContextError(st.ctx.Err()).Err()
		}
	}
}

// SendMsg sends m: it writes the socket itself, as the send windows allow.
func (st *stream) SendMsg(m any) error {
	data, err := st.c.srv.opts.Codec.Marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "h2grpc: failed to marshal the message: %v", err)
	}
	defer data.Free()
	var arr [8][]byte
	parts := arr[:0]
	for _, b := range data {
		parts = append(parts, b.ReadOnlyData())
	}
	return st.send(parts, data.Len())
}

// SendParts implements PartsSender.
func (st *stream) SendParts(parts [][]byte) error {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	return st.send(parts, size)
}

// send sends one message of size bytes, the concatenation of parts.
func (st *stream) send(parts [][]byte, size int) error {
	if max := st.c.srv.opts.MaxSendMsgSize; max > 0 && size > max {
		err := status.Errorf(codes.ResourceExhausted, "h2grpc: trying to send message larger than max (%d vs. %d)", size, max)
		// As grpc-go does: the call ends with the error's status, and a
		// receive waiting on another goroutine fails.
		st.writeStatus(err)
		st.cancel()
		return err
	}
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(size))
	c := st.c
	c.wmu.Lock()
	defer func() {
		c.wakeConnLocked() // room this send leaves on the connection goes to the next in line
		c.wmu.Unlock()
	}()
	if err := st.sendableLocked(); err != nil {
		return err
	}
	total := len(prefix) + size
	need := frameHeaderLen + len(responseHeaders) + total + frameHeaderLen*(total/c.maxFrame+1)
	c.wbuf = slices.Grow(c.bufLocked(), min(need, maxPooledWrite))
	if !st.headersSent {
		st.appendHeadersLocked()
	}
	cur, next := prefix[:], 0
	for left := total; left > 0; {
		for {
			if err := st.sendableLocked(); err != nil {
				return err
			}
			if c.sendWin > 0 && st.sendWin > 0 {
				break
			}
			if err := c.flushLocked(); err != nil {
				return err
			}
			st.waitWindowLocked()
		}
		n := int(min(int64(left), c.sendWin, st.sendWin, int64(c.maxFrame)))
		if len(c.wbuf) > 0 && len(c.wbuf)+frameHeaderLen+n > maxPooledWrite {
			// A large message is written a pooled buffer at a time.
			if err := c.flushLocked(); err != nil {
				return err
			}
			c.wbuf = slices.Grow(c.bufLocked(), min(frameHeaderLen*(left/c.maxFrame+1)+left, maxPooledWrite))
		}
		c.wbuf = appendFrameHeader(c.bufLocked(), n, http2.FrameData, 0, st.id)
		st.partial = left > n
		for k := n; k > 0; {
			if len(cur) == 0 {
				cur = parts[next]
				next++
				continue
			}
			t := min(k, len(cur))
			c.wbuf = append(c.wbuf, cur[:t]...)
			cur, k = cur[t:], k-t
		}
		c.sendWin -= int64(n)
		st.sendWin -= int64(n)
		left -= n
		c.sentSincePing.Store(true) // frame by frame: a client pings as a large message arrives
	}
	return c.flushLocked()
}

// waitWindowLocked waits until what the stream's sender lacks may have
// changed: the stream's send window, or else the connection's (in line,
// see conn.wakeConnLocked); or the stream or the connection has ended.
// Only what concerns the stream wakes it: a WINDOW_UPDATE on another
// stream does not. Call it with wmu held, with one of the windows empty.
func (st *stream) waitWindowLocked() {
	c := st.c
	if st.sendWin <= 0 {
		st.waitFor = waitStream
		c.wakeConnLocked() // what is left of the connection's window is for the next in line
	} else {
		st.waitFor = waitConn
		if !st.inLine {
			c.lineUpLocked(st)
		}
	}
	st.wcond.Wait()
	st.waitFor = waitNone // woken otherwise than by wakeLocked: the stream's end
}

// wakeLocked wakes the stream's sender if it waits for window; it then
// waits no more, so an entry of the stream left in connWaiters is
// skipped. Call it with wmu held.
func (st *stream) wakeLocked() {
	if st.waitFor == waitNone {
		return
	}
	st.waitFor = waitNone
	st.c.wakes++
	st.wcond.Broadcast()
}

// sendableLocked returns why nothing more may be sent on the stream, if
// anything. Call it with wmu held.
func (st *stream) sendableLocked() error {
	if st.done {
		return st.doneErr
	}
	return st.c.werr
}

// appendHeadersLocked appends the response headers. Call it with wmu held.
func (st *stream) appendHeadersLocked() {
	block := responseHeaders
	if len(st.header) > 0 {
		block = appendMD(slices.Clone(responseHeaders), st.header)
	}
	st.c.wbuf = appendHeaderBlock(st.c.bufLocked(), st.id, block, false, st.c.maxFrame)
	st.headersSent = true
	st.c.sentSincePing.Store(true)
}

// appendHeaderBlock appends block as a HEADERS frame and as many
// CONTINUATION frames as frames of maxFrame bytes need.
func appendHeaderBlock(b []byte, id uint32, block []byte, end bool, maxFrame int) []byte {
	t, flags := http2.FrameHeaders, http2.Flags(0)
	if end {
		flags = http2.FlagHeadersEndStream
	}
	for {
		n := min(len(block), maxFrame)
		f := flags
		if n == len(block) {
			f |= http2.FlagHeadersEndHeaders
		}
		b = appendFrameHeader(b, n, t, f, id)
		b = append(b, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			return b
		}
		t, flags = http2.FrameContinuation, 0
	}
}

// SetHeader adds md to the response headers, unless they are sent.
func (st *stream) SetHeader(md metadata.MD) error {
	st.c.wmu.Lock()
	defer st.c.wmu.Unlock()
	if st.headersSent {
		return status.Error(codes.Internal, "h2grpc: headers already sent")
	}
	st.header = metadata.Join(st.header, md)
	return nil
}

// SendHeader sends the response headers with md added.
func (st *stream) SendHeader(md metadata.MD) error {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := st.sendableLocked(); err != nil {
		return err
	}
	if st.headersSent {
		return status.Error(codes.Internal, "h2grpc: headers already sent")
	}
	st.header = metadata.Join(st.header, md)
	st.appendHeadersLocked()
	return c.flushLocked()
}

// SetTrailer adds md to the trailers sent when the handler returns.
func (st *stream) SetTrailer(md metadata.MD) {
	st.c.wmu.Lock() // a send on another goroutine may write the status (writeStatus)
	defer st.c.wmu.Unlock()
	st.trailer = metadata.Join(st.trailer, md)
}

// transportStream is the grpc.ServerTransportStream of a stream, for
// grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer and grpc.Method.
type transportStream struct{ st *stream }

func (t transportStream) Method() string                  { return t.st.path }
func (t transportStream) SetHeader(md metadata.MD) error  { return t.st.SetHeader(md) }
func (t transportStream) SendHeader(md metadata.MD) error { return t.st.SendHeader(md) }
func (t transportStream) SetTrailer(md metadata.MD) error {
	t.st.SetTrailer(md)
	return nil
}

// finish ends the stream once its handler has returned err: it sends the
// status in trailers (and RST_STREAM if the client is still sending), and
// forgets the stream.
func (st *stream) finish(err error) {
	st.writeStatus(err)
	st.cancel()
	st.c.removeStream(st)
	st.rmu.Lock()
	st.closed = true
	st.dropLocked()
	st.rmu.Unlock()
	st.c.creditConn() // what it held no longer holds the connection's window back
}

// writeStatus ends the call with err's status, in trailers, unless it has
// ended: nothing more is sent on it.
func (st *stream) writeStatus(err error) {
	st.c.wmu.Lock()
	st.writeStatusLocked(err)
	st.c.wmu.Unlock()
}

// writeStatusLocked is writeStatus with wmu held.
func (st *stream) writeStatusLocked(err error) {
	s := status.Convert(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		s = status.FromContextError(err)
	}
	c := st.c
	if !st.done && c.werr == nil {
		var block []byte
		if st.headersSent {
			block = appendTrailers(nil, s, st.trailer)
		} else {
			block = appendTrailers(slices.Clone(responseHeaders), s, metadata.Join(st.header, st.trailer))
		}
		c.wbuf = appendHeaderBlock(c.bufLocked(), st.id, block, true, c.maxFrame)
		c.sentSincePing.Store(true)
		st.rmu.Lock()
		half := st.halfClosed
		st.rmu.Unlock()
		if !half {
			c.wbuf = appendRSTStream(c.wbuf, st.id, http2.ErrCodeNo)
		}
		_ = c.flushLocked()
	}
	st.done, st.doneErr = true, status.Error(codes.Internal, "h2grpc: the call has ended")
	st.wakeLocked() // a send waiting on another goroutine fails
}

// expire ends the stream when its grpc-timeout has passed, as grpc-go's
// server does: RST_STREAM CANCEL, no trailers, and the handler's waiting
// receive or send fails with DeadlineExceeded. It runs once the stream's
// context is done, and does nothing if that was for another reason or the
// stream has ended.
func (st *stream) expire() {
	if st.ctx.Err() != context.DeadlineExceeded {
		return
	}
	st.c.reset(st, st.id, http2.ErrCodeCancel, status.Error(codes.DeadlineExceeded, "h2grpc: the call's deadline has passed"), true)
}

// reset ends the stream with err without trailers (the client reset it, or
// the connection closed): the handler's next receive or send fails.
//
// The stream is marked done before its context is cancelled: a handler
// that returns once its context ends then writes nothing on the stream,
// which the client has closed (RFC 9113 §5.1). Its context is cancelled
// before its receive or send fails, so a handler that sees err finds its
// context ended.
func (st *stream) reset(err error) {
	st.c.wmu.Lock()
	if !st.done {
		st.done, st.doneErr = true, err
	}
	st.cancel()
	st.wakeLocked()
	st.c.wmu.Unlock()
	st.rmu.Lock()
	st.rerr = err
	st.dropLocked()
	st.rmu.Unlock()
	st.notify()
	st.c.creditConn()
}

// dropLocked frees what was received and not taken. Call it with rmu held.
func (st *stream) dropLocked() {
	for _, b := range st.queue {
		b.Free()
	}
	st.queue = nil
	if st.queued != 0 {
		st.addQueuedLocked(-st.queued)
	}
	st.freeMsgLocked()
}

// freeMsgLocked frees the message being read, if any. Call it with rmu
// held.
func (st *stream) freeMsgLocked() {
	if st.msg != nil {
		st.c.assembling.Add(-int64(cap(*st.msg)))
		freeMsg(st.msg)
		st.msg = nil
	}
}

// msgFirstPart is the most a message's buffer holds before its bytes come:
// it grows, doubling, as they do.
const msgFirstPart = 64 << 10

// growMsgLocked makes the message's buffer hold at least n bytes, at most
// its size, and reports whether it did: not if the connection's messages
// being assembled would then pass Options.MaxConnAssemblingBytes. Call it
// with rmu held.
func (st *stream) growMsgLocked(n int) bool {
	size := min(st.msgSize, max(n, 2*len(*st.msg)))
	if size <= cap(*st.msg) { // room enough already, and counted
		*st.msg = (*st.msg)[:size]
		return true
	}
	more := int64(msgCap(size) - cap(*st.msg))
	if st.c.assembling.Add(more) > st.c.srv.opts.MaxConnAssemblingBytes {
		st.c.assembling.Add(-more)
		return false
	}
	b := allocMsg(size)
	copy(*b, (*st.msg)[:st.msgN])
	freeMsg(st.msg)
	st.msg = b
	return true
}

// allocMsg returns a buffer of n bytes for a message: from msgBufs, unless
// it is small enough for grpc-go's codec not to pool it.
func allocMsg(n int) *[]byte {
	if mem.IsBelowBufferPoolingThreshold(n) {
		b := make([]byte, n)
		return &b
	}
	return msgBufs.Get(n)
}

// msgCap returns the capacity of the buffer allocMsg(n) returns.
func msgCap(n int) int {
	if t := msgTier(n); t >= 0 && !mem.IsBelowBufferPoolingThreshold(n) {
		return 1 << (t + minMsgTier)
	}
	return n
}

// freeMsg gives back a buffer allocMsg returned.
func freeMsg(b *[]byte) {
	if !mem.IsBelowBufferPoolingThreshold(len(*b)) {
		msgBufs.Put(b)
	}
}
