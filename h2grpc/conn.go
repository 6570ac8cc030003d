package h2grpc

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// maxFrameSize is the largest frame the server accepts (the protocol's
// default; it does not advertise more).
const maxFrameSize = 16 << 10

// maxHeaderListSize bounds a request's header block, decoded.
const maxHeaderListSize = 64 << 10

// errConnClosed fails sends on a connection that has closed.
var errConnClosed = status.Error(codes.Unavailable, "h2grpc: connection closed")

// conn is one HTTP/2 connection. Its goroutine (serve) reads and handles
// every frame; sends write the socket from the sender's goroutine.
//
// Locking: wmu serialises writes to the socket and guards the send side:
// wbuf, the send windows (the connection's and every stream's), maxFrame,
// werr, the held answer to a bandwidth probe (ack*), connWaiters and each
// stream's send state. A sender waiting for window waits on its stream's
// wcond (on wmu), which only what concerns that stream wakes: see
// stream.waitWindowLocked. mu guards the fields below it (streams, last,
// lastID, opening, goingAway, closed). A goroutine holding mu never takes
// wmu; one holding wmu may take mu.
type conn struct {
	srv  *Server
	raw  net.Conn      // the accepted connection; closing it ends everything
	w    io.Writer     // raw, or TLS over it (newWriter); written under wmu once ready
	fr   *http2.Framer // read by serve only
	r    io.Reader     // the socket, buffered; serve's only
	pr   *pooledReader // r, if it is one (a socket, on Unix), else nil
	peer *peer.Peer

	// assembling counts the bytes of the buffers its streams assemble
	// messages in (see Options.MaxConnAssemblingBytes); changed under each
	// stream's rmu.
	assembling atomic.Int64
	// queued counts what the streams' queues cost (stream.queued): the
	// messages received that handlers have not taken. While it is at
	// Options.MaxConnQueuedBytes or more, the connection's window is not
	// credited back (see connCredit).
	queued atomic.Int64

	// The connection's receive window: only serve lowers recvWin and
	// raises recvUnacked; connCredit, on any goroutine, moves credit
	// from one to the other.
	recvWin     atomic.Int32 // what the client may still send on the connection
	recvUnacked atomic.Int32 // received and not yet credited back

	// Read side, serve's only.
	hb          headerBlock
	hdec        *hpack.Decoder // decodes header blocks into hb
	handlers    sync.WaitGroup
	lastPing    time.Time // see checkPing
	pingStrikes int
	// lastSettings and settingsTokens are checkSettings's.
	lastSettings   time.Time
	settingsTokens float64
	// sentSincePing is set when a stream's headers or data are written
	// (by any goroutine), and cleared by the next PING.
	sentSincePing atomic.Bool
	ka            connAlive // the keepalive check's: see keepalive.go

	wmu       sync.Mutex
	wbuf      []byte  // frames not yet written: see bufLocked
	wbufp     *[]byte // wbuf's handle in writeBufs
	sendWin   int64   // the connection's send window
	initWin   int64   // the client's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame  int     // the client's SETTINGS_MAX_FRAME_SIZE
	werr      error   // set once a write fails or the connection closes
	ready     bool    // the handshake is done: frames may be written
	ackHeld   bool    // a bandwidth probe's PING waits to be answered: see holdProbeAckLocked
	ackSweeps uint64  // the sweeps of held answers begun before it was held
	// connWaiters are the streams whose senders wait for the connection's
	// send window, first come first; an entry whose stream no longer
	// waits for it (waitFor) is skipped. See wakeConnLocked.
	connWaiters []*stream
	wakes       uint64 // senders woken while they waited for window (stream.wakeLocked), for tests

	mu        sync.Mutex
	streams   map[uint32]*stream
	last      *stream // the stream stream looked up last, if still open: usually the only one
	lastID    uint32  // highest stream id the client opened
	opening   int     // streams onHeaders accepted (up to lastID) and has not yet put in streams
	goingAway bool    // GOAWAY sent: no new streams; close when none is left or opening
	closed    bool
	// ageTimer is the connection's age, then its grace (see age.go); nil
	// if unbounded. ageStopped says the connection is closing: no timer
	// is armed again.
	ageTimer   *time.Timer
	ageStopped bool
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, raw: nc, sendWin: 65535, initWin: 65535, maxFrame: 16384,
		streams: make(map[uint32]*stream)}
	return c
}

// serve runs the connection: handshake, then frames until the connection
// fails or closes; then it ends every stream and waits for their handlers.
func (c *conn) serve() {
	err := c.handshake()
	if err == nil {
		c.startAging()
		err = c.readLoop()
	}
	c.stopAging()
	c.shutdown(err)
}

// handshake runs TLS if configured, reads the client preface and sends the
// server's settings.
func (c *conn) handshake() error {
	o := &c.srv.opts
	_ = c.raw.SetDeadline(time.Now().Add(o.HandshakeTimeout))
	nc := c.raw
	sock := socketOf(nc)
	if o.TLS != nil || sock == nil {
		// Without a socketWriter to count what the socket takes (TLS's
		// writes, or a connection that is not a socket), count it here.
		nc, sock = sentConn{nc, &c.ka.sent}, nil
	}
	var auth credentials.AuthInfo
	if o.TLS != nil {
		tc := tls.Server(nc, o.TLS)
		if err := tc.Handshake(); err != nil {
			return err
		}
		cs := tc.ConnectionState()
		if p := cs.NegotiatedProtocol; p != "" && p != "h2" {
			return fmt.Errorf("%w: %q", errNotH2, p)
		}
		auth = credentials.TLSInfo{State: cs, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
		nc = tc
	}
	c.peer = &peer.Peer{Addr: c.raw.RemoteAddr(), LocalAddr: c.raw.LocalAddr(), AuthInfo: auth}
	c.r = newReader(nc, sock, &c.ka)
	c.pr, _ = c.r.(*pooledReader)
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.r, preface[:]); err != nil {
		return err
	}
	if string(preface[:]) != http2.ClientPreface {
		return errNotPreface
	}
	_ = c.raw.SetDeadline(time.Time{})
	if c.pr != nil {
		c.pr.guardWith(c.raw.SetReadDeadline)
	}
	c.fr = http2.NewFramer(io.Discard, c.r)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(maxFrameSize)
	c.hdec = c.newHeaderDecoder()
	c.recvWin.Store(65535)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.w, c.ready = newWriter(nc, sock, &c.ka.sent), true
	c.ka.rc = socketOf(c.raw)
	c.ka.started.Store(true)
	c.wbuf = appendSettings(c.bufLocked(),
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: o.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(o.InitialWindowSize)},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderListSize})
	if inc := o.InitialConnWindowSize - 65535; inc > 0 {
		c.wbuf = appendWindowUpdate(c.bufLocked(), 0, uint32(inc))
		c.recvWin.Add(inc)
	}
	c.mu.Lock()
	if c.goingAway { // GracefulStop came during the handshake
		c.wbuf = appendGoAway(c.bufLocked(), 0, http2.ErrCodeNo, "server shutting down")
	}
	c.mu.Unlock()
	return c.flushLocked()
}

// readLoop reads and handles frames until an error.
func (c *conn) readLoop() error {
	first := true
	for {
		if c.pr != nil {
			c.pr.atBoundary()
		}
		fh, err := c.fr.ReadFrameHeader()
		if errors.Is(err, http2.ErrFrameTooLarge) {
			return http2.ConnectionError(http2.ErrCodeFrameSize) // RFC 9113 §4.2
		}
		if err != nil {
			return err
		}
		if first {
			if fh.Type != http2.FrameSettings {
				return http2.ConnectionError(http2.ErrCodeProtocol)
			}
			first = false
			if c.pr != nil && !c.srv.pullOnly { // from the next frame on
				c.pr.frames = c.handleWhole
			}
		}
		switch fh.Type {
		case http2.FrameData:
			err = c.readData(fh)
		case http2.FrameWindowUpdate:
			err = c.readWindowUpdate(fh)
		case http2.FrameHeaders, http2.FrameContinuation:
			if fh.Type == http2.FrameHeaders && fh.Length < headersMin(fh.Flags) {
				return http2.ConnectionError(http2.ErrCodeFrameSize) // RFC 9113 §4.2; the framer's error says nothing of it
			}
			var f http2.Frame
			f, err = c.fr.ReadFrameForHeader(fh)
			err = c.onHeaderFrame(fh, f, err)
		default:
			var f http2.Frame
			f, err = c.fr.ReadFrameForHeader(fh)
			if err == nil {
				err = c.handle(f)
			}
		}
		if err = c.streamFailed(err); err != nil {
			return err
		}
	}
}

// headersMin is the length a HEADERS frame with flags has at least: its
// pad length and stream dependency fields, if flags say it has them.
func headersMin(flags http2.Flags) uint32 {
	n := uint32(0)
	if flags.Has(http2.FlagHeadersPadded) {
		n++
	}
	if flags.Has(http2.FlagHeadersPriority) {
		n += 5
	}
	return n
}

// streamFailed resets the stream of a stream error and reports nil; any
// other error fails the connection.
func (c *conn) streamFailed(err error) error {
	if err == nil {
		return nil // and errors.As's target is not allocated
	}
	var se http2.StreamError
	if errors.As(err, &se) {
		c.resetStream(se.StreamID, se.Code)
		return nil
	}
	return err
}

// handle handles a frame other than DATA.
func (c *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		return c.onPing(f.IsAck(), f.Data[:])
	case *http2.RSTStreamFrame:
		// RST_STREAM on an idle stream is a connection error (RFC 9113
		// §5.1), but gRPC's C-core sends one for a call cancelled before
		// its HEADERS went out (grpc/grpc#19655): as grpc-go's server
		// does, that is ignored, rather than end every call on the
		// connection. Streams of the server's own (even) stay an error.
		if f.StreamID%2 == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if st := c.stream(f.StreamID); st != nil {
			st.reset(status.Error(codes.Canceled, "h2grpc: the client reset the stream"))
		}
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol} // RFC 9113 §5.3.1
		}
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	case *http2.GoAwayFrame:
		// The client opens no more streams; those open carry on.
	}
	return nil // PRIORITY otherwise, unknown types: ignored
}

// onPing answers a PING with its 8 bytes of data, unless it is an answer
// itself, and applies the ping policy. A bandwidth probe's answer may wait
// for the next frames written (holdProbeAckLocked).
func (c *conn) onPing(ack bool, data []byte) error {
	if ack {
		return nil
	}
	var err error
	c.wmu.Lock()
	if !c.holdProbeAckLocked(data) {
		c.wbuf = appendPingAck(c.bufLocked(), data)
		err = c.flushLocked()
	}
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	return c.checkPing(time.Now()) // answered (or held) first, as grpc-go answers first
}

// onSettings applies a client's SETTINGS and answers them. The answer is
// written with the answer to the SETTINGS frame that follows, if its
// header is buffered already (and it is not an answer), and so on: a run of SETTINGS is answered in
// one write. The SETTINGS policy applies (checkSettings).
func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	if err := c.checkSettings(time.Now()); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	initWin := c.initWin
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			initWin = int64(s.Val) // the last one counts
		case http2.SettingMaxFrameSize:
			c.maxFrame = int(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The streams' windows move once per frame, however many times it
	// repeats the setting: a walk of every stream per entry let a client
	// with thousands of streams spend the server's CPU with a few frames.
	if delta := initWin - c.initWin; delta != 0 {
		c.initWin = initWin
		c.mu.Lock() // wmu then mu: see conn
		overflow := false
		for _, st := range c.streams {
			st.sendWin += delta
			overflow = overflow || st.sendWin > 1<<31-1
			if st.sendWin > 0 && st.waitFor == waitStream {
				st.wakeLocked()
			}
		}
		c.mu.Unlock()
		if overflow { // RFC 9113 6.9.2
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
	}
	c.wbuf = appendFrameHeader(c.bufLocked(), 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
	if c.pr != nil {
		if t, flags, ok := c.pr.nextFrame(); ok && t == http2.FrameSettings && !flags.Has(http2.FlagSettingsAck) {
			// The next frame's answer, or the GOAWAY that ends the
			// connection if it is not valid, writes this one.
			return nil
		}
	}
	return c.flushLocked()
}

// readWindowUpdate reads a WINDOW_UPDATE frame's payload and applies it,
// without making a frame value: a client sends one for about every
// window's quarter it receives.
func (c *conn) readWindowUpdate(fh http2.FrameHeader) error {
	if fh.Length != 4 {
		return http2.ConnectionError(http2.ErrCodeFrameSize)
	}
	var b [4]byte
	if _, err := io.ReadFull(c.r, b[:]); err != nil {
		return err
	}
	return c.windowUpdate(fh, b[:])
}

// windowUpdate applies a WINDOW_UPDATE frame of 4 bytes, checked as the
// HTTP/2 framer would.
func (c *conn) windowUpdate(fh http2.FrameHeader, b []byte) error {
	if fh.StreamID != 0 && c.idleStream(fh.StreamID) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	inc := binary.BigEndian.Uint32(b) & (1<<31 - 1)
	if inc == 0 {
		if fh.StreamID == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return http2.StreamError{StreamID: fh.StreamID, Code: http2.ErrCodeProtocol}
	}
	return c.onWindowUpdate(fh.StreamID, inc)
}

// onWindowUpdate credits inc bytes to stream id's send window (0: the
// connection's).
func (c *conn) onWindowUpdate(id, inc uint32) error {
	var st *stream
	if id != 0 {
		if st = c.stream(id); st == nil {
			return nil // a closed stream
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	win := &c.sendWin
	if st != nil {
		win = &st.sendWin
	}
	*win += int64(inc)
	if *win > 1<<31-1 {
		if st == nil {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	if st == nil {
		c.wakeConnLocked()
	} else if st.sendWin > 0 && st.waitFor == waitStream {
		st.wakeLocked() // its sender alone: a client crediting one stream wakes no other
	}
	return nil
}

// wakeConnLocked wakes the first sender waiting for the connection's send
// window, if it has room. Only one: a client crediting the connection a
// byte at a time, with a thousand senders waiting, would otherwise have
// each WINDOW_UPDATE wake them all, to find room for one. The sender woken
// calls it again once it is done with the window (when it waits for its
// stream's window, or its send ends, however it ends), so that room it
// leaves goes to the next in line; one that finds no room left gets back
// in line. Call it with wmu held.
func (c *conn) wakeConnLocked() {
	for c.sendWin > 0 && len(c.connWaiters) > 0 {
		st := c.connWaiters[0]
		c.connWaiters[0] = nil
		c.connWaiters = c.connWaiters[1:]
		st.inLine = false
		if st.waitFor == waitConn && !st.done {
			st.wakeLocked()
			return
		}
	}
	if len(c.connWaiters) == 0 {
		c.connWaiters = nil // the array is not kept
	}
}

// lineUpLocked puts st, which has no entry, at the end of connWaiters.
// Entries of streams that no longer wait for the connection's window are
// dropped whenever the line's length reaches a power of two, so that a
// client that never credits the connection, opening and resetting
// streams whose senders wait, cannot grow it without bound: a stream has
// one entry at most, so the line holds at most about twice the streams
// that wait. Call it with wmu held.
func (c *conn) lineUpLocked(st *stream) {
	if n := len(c.connWaiters); n >= 32 && n&(n-1) == 0 {
		kept := c.connWaiters[:0]
		for _, w := range c.connWaiters {
			if w.waitFor == waitConn && !w.done {
				kept = append(kept, w)
			} else {
				w.inLine = false
			}
		}
		clear(c.connWaiters[len(kept):])
		c.connWaiters = kept
	}
	c.connWaiters = append(c.connWaiters, st)
	st.inLine = true
}

// wakeAllLocked wakes every sender waiting for window: the connection has
// failed (werr). Call it with wmu held.
func (c *conn) wakeAllLocked() {
	c.mu.Lock() // wmu then mu: see conn
	for _, st := range c.streams {
		st.wakeLocked()
	}
	c.mu.Unlock()
}

// idleStream reports whether stream id was never opened by the client: a
// frame on it other than HEADERS or PRIORITY is a connection error (RFC
// 9113, section 5.1). This server opens no streams of its own.
func (c *conn) idleStream(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return id%2 == 0 || id > c.lastID
}

// stream returns the open stream id, or nil.
func (c *conn) stream(id uint32) *stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && c.last.id == id {
		return c.last
	}
	st := c.streams[id]
	if st != nil {
		c.last = st
	}
	return st
}

// readData reads a DATA frame's payload and hands it to its stream.
func (c *conn) readData(fh http2.FrameHeader) error {
	if fh.StreamID == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if c.pr != nil {
		if data, ok := c.pr.take(int(fh.Length)); ok { // buffered whole: no copy
			return c.onData(fh, data)
		}
	}
	buf := payloadBufs.Get().(*[]byte)
	defer payloadBufs.Put(buf)
	data := (*buf)[:fh.Length]
	if _, err := io.ReadFull(c.r, data); err != nil {
		return err
	}
	return c.onData(fh, data)
}

// payloadBufs holds buffers for DATA payloads that are not buffered whole.
var payloadBufs = sync.Pool{New: func() any { b := make([]byte, maxFrameSize); return &b }}

// onData handles a DATA frame on a stream other than 0, with its payload.
func (c *conn) onData(fh http2.FrameHeader, data []byte) error {
	if fh.Flags.Has(http2.FlagDataPadded) {
		if len(data) == 0 || int(data[0]) >= len(data) {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		data = data[1 : len(data)-int(data[0])]
	}
	// The connection's window counts the whole frame, padding included.
	n := int32(fh.Length)
	if n > c.recvWin.Load() {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvWin.Add(-n)
	c.recvUnacked.Add(n)
	connCredit := c.connCredit()
	st := c.stream(fh.StreamID)
	if st == nil && c.idleStream(fh.StreamID) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	var credit int32
	var err error
	if st != nil { // else a stream that has ended: its data is dropped
		credit, err = st.take(data, n, fh.Flags.Has(http2.FlagDataEndStream))
	}
	// Both windows are credited in one write: with one stream on the
	// connection, they fall due on the same frame.
	if werr := c.writeWindowUpdates(connCredit, st, credit); werr != nil {
		return werr
	}
	return err
}

// connCredit returns the bytes to credit back to the client on the
// connection now, if any: once a quarter of its window is used, unless
// its handlers are behind by Options.MaxConnQueuedBytes or more; then the
// handler that takes a message, or a stream that ends, credits it (see
// creditConn). It runs on any goroutine.
func (c *conn) connCredit() int32 {
	if c.recvUnacked.Load() < c.srv.opts.InitialConnWindowSize/4 || c.queued.Load() >= c.srv.opts.MaxConnQueuedBytes {
		return 0
	}
	n := c.recvUnacked.Swap(0)
	c.recvWin.Add(n)
	return n
}

// creditConn writes the connection's credit, if any is due: after the
// handlers' queues have shrunk.
func (c *conn) creditConn() {
	if n := c.connCredit(); n > 0 {
		_ = c.writeWindowUpdates(n, nil, 0) // a failure fails the connection
	}
}

// onHeaders opens a stream, or half-closes one on trailers.
func (c *conn) onHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if st := c.stream(id); st != nil { // trailers: gRPC clients send none, but may end a stream so
		if !f.StreamEnded() {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		}
		return st.onData(nil, 0, true)
	}
	c.mu.Lock()
	if id <= c.lastID {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.lastID = id
	full := uint32(len(c.streams)) >= c.srv.opts.MaxConcurrentStreams
	refuse := c.goingAway || c.closed || full
	if !refuse {
		c.opening++ // a GOAWAY from now on names it (lastID) and waits for it
	}
	c.mu.Unlock()
	if refuse {
		if full {
			c.srv.stats.streamsRefused.Add(1)
			c.logRefusal("a stream: its connection has as many open as allowed (MaxConcurrentStreams)", id)
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	if f.Truncated { // its fields passed maxHeaderListSize: see onHeaderFrame
		err := c.writeTrailersOnly(id, errHeadersTooLarge)
		c.opened(nil)
		return err
	}
	if malformed(f) {
		c.resetStream(id, http2.ErrCodeProtocol) // before opened, which may close a draining connection
		c.opened(nil)
		return nil
	}
	st, err := c.newStream(f)
	if err != nil {
		err = c.writeTrailersOnly(id, status.Convert(err))
		c.opened(nil)
		return err
	}
	c.opened(st)
	if f.StreamEnded() {
		_ = st.onData(nil, 0, true)
	}
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		st.run()
	}()
	return nil
}

// errHeadersTooLarge refuses a request whose header fields pass
// maxHeaderListSize, which the server advertises (a gRPC client fails
// such a call itself).
var errHeadersTooLarge = status.Newf(codes.ResourceExhausted, "h2grpc: request header list larger than the server's SETTINGS_MAX_HEADER_LIST_SIZE (%d)", maxHeaderListSize)

// opened ends the opening of a stream onHeaders accepted: st is served
// from now on or, nil, was answered at once. A connection that sent GOAWAY
// closes once no stream is left or opening.
func (c *conn) opened(st *stream) {
	c.mu.Lock()
	c.opening--
	if st != nil {
		c.streams[st.id] = st
	}
	closeNow := c.goingAway && c.idleLocked()
	c.mu.Unlock()
	if closeNow {
		c.raw.Close()
	}
}

// idleLocked reports whether no stream is open or being opened. Call it
// with mu held.
func (c *conn) idleLocked() bool { return len(c.streams) == 0 && c.opening == 0 }

// malformed reports whether a request's header block is malformed (RFC
// 9113 §8.1.1): its stream depends on itself (§5.3.1), it lacks :method,
// :scheme or :path (§8.3.1), it has a connection-specific field, or te
// other than "trailers" (§8.2.2), or a content-length that is not one
// number, or not 0 on a header block that ends the stream. The framer
// checks the rest; the stream checks the DATA against the content-length.
func malformed(f *http2.MetaHeadersFrame) bool {
	if f.HasPriority() && f.Priority.StreamDep == f.StreamID {
		return true
	}
	if f.PseudoValue("method") == "" || f.PseudoValue("scheme") == "" || f.PseudoValue("path") == "" {
		return true
	}
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			return true
		case "te":
			if hf.Value != "trailers" {
				return true
			}
		}
	}
	n, err := contentLength(f)
	return err != nil || n > 0 && f.StreamEnded()
}

// contentLength returns the content-length a request's header block gives,
// -1 if none, or an error if it gives one that is not valid: digits, the
// same in every content-length field (RFC 9110 §8.6).
func contentLength(f *http2.MetaHeadersFrame) (int64, error) {
	n := int64(-1)
	for _, hf := range f.RegularFields() {
		if hf.Name != "content-length" {
			continue
		}
		v, err := strconv.ParseInt(hf.Value, 10, 64)
		if err != nil || hf.Value[0] < '0' || hf.Value[0] > '9' || n >= 0 && v != n {
			return -1, errors.New("h2grpc: malformed content-length")
		}
		n = v
	}
	return n, nil
}

// resetStream sends RST_STREAM with code and ends the stream, if open. The
// stream is marked done with the RST_STREAM written, and its context
// cancelled, before its handler can learn of the error: a handler that
// returned at once would otherwise answer with trailers first, and the
// reset would go unseen. The stream's frames still in flight are then
// ignored (RFC 9113 §5.1), not reset again one by one.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	st := c.stream(id)
	c.mu.Lock()
	if id%2 == 1 && id > c.lastID { // a new stream refused: its frames in flight are not an error
		c.lastID = id
	}
	c.mu.Unlock()
	c.reset(st, id, code, status.Errorf(codes.Internal, "h2grpc: stream error %v", code), false)
}

// reset is resetStream once the stream, st (nil if unknown), is found: it
// ends it with err. With ifOpen, a stream that has ended (its trailers
// sent, or reset) is left alone and nothing is written.
func (c *conn) reset(st *stream, id uint32, code http2.ErrCode, err error, ifOpen bool) {
	c.wmu.Lock()
	if ifOpen && (st.done || c.werr != nil) {
		c.wmu.Unlock()
		return
	}
	if st != nil && !st.done {
		st.done, st.doneErr = true, err
	}
	c.wbuf = appendRSTStream(c.bufLocked(), id, code)
	_ = c.flushLocked()
	if st != nil {
		st.cancel() // so that a handler whose send fails finds its context ended
	}
	c.wmu.Unlock()
	if st != nil {
		st.rmu.Lock()
		st.rstSent = true
		st.rmu.Unlock()
		st.reset(err)
	}
}

// writeWindowUpdates credits connInc bytes back to the client on the
// connection and inc on stream st, in one write; a zero credits nothing.
// A stream that has ended (its trailers, and any RST_STREAM, written) is
// credited nothing: no frame may follow those on it (RFC 9113 §5.1).
func (c *conn) writeWindowUpdates(connInc int32, st *stream, inc int32) error {
	if connInc <= 0 && inc <= 0 {
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if inc > 0 && st.done {
		inc = 0
	}
	if connInc <= 0 && inc <= 0 {
		return nil
	}
	if connInc > 0 {
		c.wbuf = appendWindowUpdate(c.bufLocked(), 0, uint32(connInc))
	}
	if inc > 0 {
		c.wbuf = appendWindowUpdate(c.bufLocked(), st.id, uint32(inc))
	}
	return c.flushLocked()
}

// writeTrailersOnly answers stream id with st alone (a trailers-only
// response) and resets it, for a request refused before its handler runs.
func (c *conn) writeTrailersOnly(id uint32, st *status.Status) error {
	block := appendTrailers(append([]byte(nil), responseHeaders...), st, nil)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = appendFrameHeader(c.bufLocked(), len(block), http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersEndStream, id)
	c.wbuf = append(c.bufLocked(), block...)
	c.wbuf = appendRSTStream(c.bufLocked(), id, http2.ErrCodeNo)
	c.sentSincePing.Store(true)
	return c.flushLocked()
}

// writeBufs holds write buffers between flushes, so that an idle
// connection holds none.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledWrite bounds the buffers kept in writeBufs.
const maxPooledWrite = 64 << 10

// bufLocked returns wbuf, taking a buffer from writeBufs if it has none. Call it
// with wmu held.
func (c *conn) bufLocked() []byte {
	if c.wbufp == nil {
		c.wbufp = writeBufs.Get().(*[]byte)
		c.wbuf = (*c.wbufp)[:0]
	}
	return c.wbuf
}

// flushLocked writes wbuf to the socket and gives the buffer back. Call it
// with wmu held.
func (c *conn) flushLocked() error {
	_, err := c.flush(false)
	return err
}

// tryWriter is a writer that can also write only what its socket takes
// without waiting (*socketWriter).
type tryWriter interface {
	tryWrite(b []byte) (int, error)
}

// flush is flushLocked, which with noWait writes only what the socket
// takes without waiting: if that is not all, it keeps the rest in wbuf and
// reports false, and nil. A writer that cannot write without waiting
// (TLS) then writes nothing.
func (c *conn) flush(noWait bool) (bool, error) {
	err := c.werr
	if err == nil && !c.ready {
		err = errConnClosed
	}
	if err == nil && c.ackHeld {
		c.wbuf = appendPingAck(c.bufLocked(), bdpProbe[:]) // after the frames: see holdProbeAckLocked
		c.ackHeld = false
	}
	if err == nil && len(c.wbuf) > 0 {
		if noWait {
			tw, ok := c.w.(tryWriter)
			n := 0
			if ok {
				n, err = tw.tryWrite(c.wbuf)
			}
			if err == nil && n < len(c.wbuf) {
				c.wbuf = c.wbuf[:copy(c.wbuf, c.wbuf[n:])]
				return false, nil
			}
		} else {
			_, err = c.w.Write(c.wbuf)
		}
		if err != nil {
			c.srv.opts.Logger.Debug("h2grpc: write failed; closing the connection", "peer", c.raw.RemoteAddr().String(), "error", err)
			c.werr = errConnClosed
			c.wakeAllLocked()
			c.abort()
			err = c.werr
		}
	}
	if c.wbufp != nil && cap(c.wbuf) <= maxPooledWrite { // a large response's buffer is not kept
		*c.wbufp = c.wbuf[:0]
		writeBufs.Put(c.wbufp)
	}
	c.wbuf, c.wbufp = nil, nil
	return true, err
}

// abort ends the connection from any goroutine, even one holding wmu: it
// shuts the socket down both ways, which wakes the reader and any writer
// waiting on it, and they fail; the reader then shuts the connection down
// (shutdown). Close would wait for them, and a reader handling frames
// inside its read may wait for wmu. The reader must be woken: after a
// failed write it may be waiting on a read's word (trustLeft) for a socket
// that will tell it nothing more. A connection that cannot be shut down
// one way at a time (not TCP or Unix) is closed on a goroutine of its own.
func (c *conn) abort() {
	// The server's count of the connection is still held: a writer holds
	// wmu, which shutdown takes before the connection ends.
	c.abortOn(&c.srv.wg)
}

// abortOn is abort, whose goroutine, if any, wg counts; the caller sees
// that a count of wg is held while it adds one.
func (c *conn) abortOn(wg *sync.WaitGroup) {
	if c.shutdownSocket() {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.raw.Close()
	}()
}

// shutdownSocket shuts the connection's socket down both ways, and reports
// whether it could (TCP and Unix sockets can).
func (c *conn) shutdownSocket() bool {
	hc, ok := c.raw.(interface {
		CloseRead() error
		CloseWrite() error
	})
	if ok {
		_ = hc.CloseRead()
		_ = hc.CloseWrite()
	}
	return ok
}

// goAway tells the client to open no more streams, and closes the
// connection if none is open.
func (c *conn) goAway() { c.goAwayWith(http2.ErrCodeNo, "server shutting down") }

// goAwayWith is goAway with the code and debug data of the GOAWAY frame.
func (c *conn) goAwayWith(code http2.ErrCode, debug string) {
	c.mu.Lock()
	if c.goingAway {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	last, idle := c.lastID, c.idleLocked()
	c.mu.Unlock()
	c.wmu.Lock()
	if c.ready { // else the handshake sends it
		c.wbuf = appendGoAway(c.bufLocked(), last, code, debug)
		_ = c.flushLocked()
	}
	c.wmu.Unlock()
	if idle {
		c.raw.Close()
	}
}

// removeStream forgets st once its handler has ended; when draining, the
// last stream's end closes the connection.
func (c *conn) removeStream(st *stream) {
	c.mu.Lock()
	delete(c.streams, st.id)
	if c.last == st {
		c.last = nil
	}
	closeNow := c.goingAway && c.idleLocked()
	c.mu.Unlock()
	if closeNow {
		c.raw.Close()
	}
}

// shutdown ends the connection after err: it tells the client why if it can,
// fails every stream and waits for their handlers.
func (c *conn) shutdown(err error) {
	var ce http2.ConnectionError
	var ge goAwayError
	switch {
	case errors.As(err, &ge):
		c.wmu.Lock()
		c.wbuf = appendGoAway(c.bufLocked(), c.lastStreamID(), ge.code, ge.debug)
		_ = c.flushLocked()
		c.wmu.Unlock()
	case errors.As(err, &ce):
		c.wmu.Lock()
		c.wbuf = appendGoAway(c.bufLocked(), c.lastStreamID(), http2.ErrCode(ce), "")
		_ = c.flushLocked()
		c.wmu.Unlock()
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.logEnd(err)
	}
	c.raw.Close()
	c.wmu.Lock()
	c.werr = errConnClosed // the streams' resets below wake their senders
	c.wmu.Unlock()
	for _, st := range c.openStreams(true) {
		st.reset(errConnClosed)
	}
	c.handlers.Wait()
}

// openStreams returns the connection's open streams; with closing, it
// marks the connection closed first.
func (c *conn) openStreams(closing bool) []*stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = c.closed || closing
	streams := make([]*stream, 0, len(c.streams))
	for _, st := range c.streams {
		streams = append(streams, st)
	}
	return streams
}

func (c *conn) lastStreamID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastID
}

// withPeer returns ctx carrying the connection's peer.
func (c *conn) withPeer(ctx context.Context) context.Context {
	return peer.NewContext(ctx, c.peer)
}
