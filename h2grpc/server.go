// Package h2grpc is xdsd's own gRPC server transport: gRPC over HTTP/2
// (cleartext with prior knowledge, or TLS with ALPN "h2"), made for many
// long-lived streams that are idle most of the time, as an xDS fleet's are.
//
// It serves the services generated for grpc-go (it is a
// grpc.ServiceRegistrar, and its streams are grpc.ServerStreams), so a
// service registered on a grpc.Server can be registered here unchanged.
// What it saves against grpc-go's transport is per connection: one reader
// goroutine besides each stream's handler (grpc-go adds a writer and a
// keepalive goroutine), no write queue (a send writes the socket itself,
// without waking another goroutine), and no buffer held while the
// connection is idle. Three extensions let a handler go further: it may
// take messages on the connection's reader goroutine without being woken
// (InlineReceiver), have the messages that wait for it kept smaller
// (Shrinker), and send a message from encoded parts it keeps, without the
// codec (PartsSender).
//
// It implements what gRPC clients use: HEADERS and CONTINUATION, DATA with
// flow control both ways, SETTINGS, PING, WINDOW_UPDATE, RST_STREAM and
// GOAWAY; unary and streaming methods; metadata, grpc-timeout, trailers with
// status and details (a call past its grpc-timeout is reset with CANCEL, as
// grpc-go's server resets it, and its handler's waiting send or receive
// fails). It does not implement compression (a request that
// asks for it is refused with Unimplemented; no xDS client compresses),
// server push or interceptors. It pings a connection that reads nothing
// for a while, and closes it if it still reads nothing
// (Options.KeepaliveTime); a failed write closes its connection at once.
// Clients' pings are limited as grpc-go limits them
// (Options.MinPingInterval), and their SETTINGS to 100 at once and 10 a
// second after (past that, GOAWAY ENHANCE_YOUR_CALM), a run of them
// answered in one write; the answer to grpc-go's bandwidth probe waits
// for the next frames written, up to 10 to 20 seconds, and goes with them
// rather than in a write of its own: the client then probes every other
// response instead of every one.
package h2grpc

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
)

// Options configures a Server. The zero value serves cleartext HTTP/2
// with the defaults documented on each field.
type Options struct {
	// TLS, if set, makes the server speak TLS; "h2" is added to its
	// NextProtos.
	TLS *tls.Config
	// Codec encodes and decodes messages; nil means grpc-go's proto codec.
	Codec encoding.CodecV2
	// MaxRecvMsgSize bounds a received message (a larger one fails its
	// stream with ResourceExhausted, counted in Stats); 0 means 4 MiB.
	MaxRecvMsgSize int
	// MaxSendMsgSize bounds a sent message; 0 means no bound.
	MaxSendMsgSize int
	// InitialWindowSize is each stream's receive window; 0 means 1 MiB.
	InitialWindowSize int32
	// InitialConnWindowSize is each connection's receive window; 0 means
	// 1 MiB.
	InitialConnWindowSize int32
	// MaxConnQueuedBytes bounds the received messages a connection holds
	// for handlers that have not taken them: past it, the connection's
	// window is not credited back until they take some, so a client that
	// sends requests without reading the responses its handlers wait to
	// send is held to it, and to a window more (InitialConnWindowSize).
	// Each stream's queue is held to its window the same way
	// (InitialWindowSize); messages being assembled, not yet whole, are
	// bounded by MaxConnAssemblingBytes. 0 means 16 MiB.
	MaxConnQueuedBytes int64
	// MaxConnAssemblingBytes bounds the buffers a connection's messages
	// are assembled in, while their bytes come (each stream's message is
	// bounded by MaxRecvMsgSize, but a client could begin one on each of
	// its streams and never end it): a message whose buffer would take
	// the connection past it fails its stream with ResourceExhausted,
	// counted in Stats. A buffer grows as its message's bytes come, and
	// one of the pool's rounds its size up to a power of two. 0 means
	// 256 MiB: 32 concurrent requests of 4 MiB fit on a connection.
	MaxConnAssemblingBytes int64
	// MaxConcurrentStreams bounds the streams open on one connection (a
	// stream past it is refused with RST_STREAM REFUSED_STREAM, counted
	// in Stats); 0 means 1,000 (an Envoy or a gRPC client opens a few; each stream
	// costs some 20 KB, and a connection with tens of thousands of them
	// held hundreds of MB).
	MaxConcurrentStreams uint32
	// HandshakeTimeout bounds the TLS handshake and the client's HTTP/2
	// preface; 0 means 10 s.
	HandshakeTimeout time.Duration
	// MinPingInterval is how often a client may ping. A ping sooner than
	// this after the previous one is a strike; strikes add up until the
	// server next sends headers, data or trailers, and a client with
	// more than two is sent GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and
	// disconnected, as grpc-go's keepalive enforcement does (with
	// PermitWithoutStream). 0 means 5 minutes, grpc-go's default;
	// negative turns the check off.
	MinPingInterval time.Duration
	// KeepaliveTime is how long a connection may read nothing before the
	// server pings it, to learn whether the client is alive; 0 means two
	// hours, grpc-go's default; negative turns keepalive off.
	KeepaliveTime time.Duration
	// KeepaliveTimeout is how long a connection may then still read
	// nothing before the server closes it; 0 or less means 20 s,
	// grpc-go's default. The bytes the client takes count as a sign of
	// life too (on Linux, those its TCP acknowledges), so a client that
	// reads a large response slowly is not closed, while one that stopped
	// reading is, after KeepaliveTime and KeepaliveTimeout, and the
	// response held up on its full socket fails and frees what it held.
	KeepaliveTimeout time.Duration
	// MaxConnectionAge, if positive, is how long a connection may live:
	// past it, give or take 10 % (connections made in a burst do not all
	// go at once), the server sends GOAWAY, and the client makes its next
	// calls on a new connection. Zero means for ever. As grpc-go's
	// keepalive.ServerParameters.MaxConnectionAge.
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace, if positive, is how long the calls of a
	// connection past its age may still run: they are then ended with
	// UNAVAILABLE (xDS streams never end by themselves), and the
	// connection closes. Zero means they run until they end.
	MaxConnectionAgeGrace time.Duration
	// Logger receives failed accepts (retried) at Warn; clients
	// disconnected for breaking the protocol or a policy (GOAWAY with an
	// error: a flood of pings or of CONTINUATION frames, a malformed
	// frame) at Warn, and clients that do not speak HTTP/2 at Info, with
	// their address and why, one line per connection and at most 10 at
	// once, then one a second, across the server (the rest at Debug, the
	// next line counting them); and other connection errors (a reset, a
	// timeout) at Debug, a client closing its connection not at all.
	// Streams and messages a bound refused (MaxConcurrentStreams,
	// MaxRecvMsgSize, MaxConnAssemblingBytes) are logged at Warn within
	// the same bounds, counted apart. nil means slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Codec == nil {
		o.Codec = encoding.GetCodecV2(proto.Name)
	}
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = 4 << 20
	}
	if o.InitialWindowSize <= 0 {
		o.InitialWindowSize = 1 << 20
	}
	if o.InitialConnWindowSize <= 0 {
		o.InitialConnWindowSize = 1 << 20
	}
	if o.MaxConnQueuedBytes <= 0 {
		o.MaxConnQueuedBytes = 16 << 20
	}
	if o.MaxConnAssemblingBytes <= 0 {
		o.MaxConnAssemblingBytes = 256 << 20
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = 1000
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.KeepaliveTime == 0 {
		o.KeepaliveTime = 2 * time.Hour
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = 20 * time.Second
	}
	if o.MinPingInterval == 0 {
		o.MinPingInterval = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if !contains(cfg.NextProtos, "h2") {
			cfg.NextProtos = append([]string{"h2"}, cfg.NextProtos...)
		}
		o.TLS = cfg
	}
	return o
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// method is a registered method: exactly one of unary and stream is set.
type method struct {
	impl   any
	unary  grpc.MethodHandler
	stream grpc.StreamHandler
}

// Server serves registered gRPC services on listeners. Register every
// service before the first Serve.
//
// Locking: mu guards listeners, conns and stopped; methods is
// written only before Serve. Each connection runs on a goroutine of the
// Server's (tracked by wg), and each stream's handler on a goroutine of its
// connection's, so Stop and GracefulStop return only once every one of them
// has ended.
type Server struct {
	opts    Options
	methods map[string]*method // by path, "/package.Service/Method"
	// pullOnly turns off the handling of frames inside socket reads (see
	// pooledReader): tests compare the two paths. Set before Serve.
	pullOnly bool
	probes   probeAnswers // the sweep that sends the probe answers nothing else carried
	ka       keepalive    // the check that clients are alive

	violations logLimit // bounds the lines about clients disconnected: see conn.logEnd
	refusals   logLimit // bounds the lines about what the bounds on each client refused: see conn.logRefusal
	stats      serverStats

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	stopped   bool // Stop or GracefulStop was called: no new connections
	served    bool // Serve was called: methods is read without mu, and no longer written (it is written with mu held)
	wg        sync.WaitGroup
}

// Stats counts what a Server refused clients, since it was made.
type Stats struct {
	// StreamsRefused counts the streams refused because their connection
	// had MaxConcurrentStreams open.
	StreamsRefused uint64
	// MessagesTooLarge counts the messages refused for being larger than
	// MaxRecvMsgSize.
	MessagesTooLarge uint64
	// AssemblingRefused counts the messages refused because their
	// connection's messages being assembled would pass
	// MaxConnAssemblingBytes.
	AssemblingRefused uint64
}

// serverStats is what Stats reads.
type serverStats struct {
	streamsRefused, tooLarge, assemblingRefused atomic.Uint64
}

// Options returns s's options, with the defaults of those left zero.
func (s *Server) Options() Options { return s.opts }

// Stats returns what s has refused clients so far.
func (s *Server) Stats() Stats {
	return Stats{
		StreamsRefused:    s.stats.streamsRefused.Load(),
		MessagesTooLarge:  s.stats.tooLarge.Load(),
		AssemblingRefused: s.stats.assemblingRefused.Load(),
	}
}

// NewServer returns a Server with opts.
func NewServer(opts Options) *Server {
	return &Server{
		opts:      opts.withDefaults(),
		methods:   make(map[string]*method),
		probes:    probeAnswers{wait: probeAckMax},
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
}

// RegisterService registers a service and its implementation, as
// grpc.Server.RegisterService does; it panics if impl does not implement
// the service, a method is registered twice, or Serve was called (the
// connections read the services without a lock).
func (s *Server) RegisterService(sd *grpc.ServiceDesc, impl any) {
	if impl != nil && sd.HandlerType != nil {
		ht := reflect.TypeOf(sd.HandlerType).Elem()
		if !reflect.TypeOf(impl).Implements(ht) {
			panic(fmt.Sprintf("h2grpc: %T does not implement %v", impl, ht))
		}
	}
	s.mu.Lock() // held while methods is written, so that Serve cannot begin meanwhile
	defer s.mu.Unlock()
	if s.served {
		panic("h2grpc: RegisterService " + sd.ServiceName + " after Serve")
	}
	add := func(name string, m *method) {
		path := "/" + sd.ServiceName + "/" + name
		if _, dup := s.methods[path]; dup {
			panic("h2grpc: method registered twice: " + path)
		}
		s.methods[path] = m
	}
	for _, md := range sd.Methods {
		add(md.MethodName, &method{impl: impl, unary: md.Handler})
	}
	for _, sd := range sd.Streams {
		add(sd.StreamName, &method{impl: impl, stream: sd.Handler})
	}
}

// ErrServerStopped is returned by Serve once the server has been stopped.
var ErrServerStopped = errors.New("h2grpc: the server has been stopped")

// Serve accepts connections on lis and serves them until lis fails or the
// server stops. It returns nil after Stop or GracefulStop, and closes lis.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		lis.Close()
		return ErrServerStopped
	}
	s.listeners[lis] = struct{}{}
	s.served = true
	s.startKeepaliveLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, lis)
		s.mu.Unlock()
		lis.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			stopped := s.stopped
			s.mu.Unlock()
			if stopped {
				return nil
			}
			// Out of file descriptors (EMFILE, ENFILE) and other passing
			// failures say so with Temporary, not Timeout: wait, for
			// connections to close, rather than end Serve and with it the
			// server every client is on.
			var temp interface{ Temporary() bool }
			if errors.As(err, &temp) && temp.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.opts.Logger.Warn("h2grpc: accept failed; retrying", "error", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Stop closes the listeners and every connection at once, then waits for
// every connection and handler goroutine to end.
func (s *Server) Stop() {
	for _, c := range s.stopAccepting() {
		c.raw.Close()
	}
	s.wg.Wait()
	s.stopProbeSweeps()
	s.stopKeepalive()
}

// GracefulStop closes the listeners and tells every client to open no new
// streams (GOAWAY), then waits for the open streams to end; a connection
// closes when its last stream ends. xDS streams end only when their clients
// end them: bound the wait by calling Stop.
func (s *Server) GracefulStop() {
	for _, c := range s.stopAccepting() {
		c.goAway() // may block on a client that does not read: Stop cuts it
	}
	s.wg.Wait()
	s.stopProbeSweeps()
	s.stopKeepalive()
}

// stopAccepting closes the listeners, refuses connections from now on and
// returns those open.
func (s *Server) stopAccepting() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for lis := range s.listeners {
		lis.Close()
	}
	return s.openConnsLocked()
}

// openConns returns the open connections.
func (s *Server) openConns() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openConnsLocked()
}

// openConnsLocked is openConns with mu held.
func (s *Server) openConnsLocked() []*conn {
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}
