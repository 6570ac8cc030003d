package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client/grpctransport"
	"github.com/xdsd/xdsd/client/transport"
)

// TransportBuilder creates the Transport to the management server; see
// package transport.
type TransportBuilder = transport.Builder

// Transport opens streams to the management server; see package transport.
type Transport = transport.Transport

// Stream is one stream of encoded xDS messages; see package transport.
type Stream = transport.Stream

// The client features the client advertises in its node (PROTOCOL L3).
const (
	featureResourceTTL    = "xds.config.supports-resource-ttl"
	featureResourceInSotw = "xds.config.supports-resource-in-sotw"
)

// DefaultWatchExpiry is how long a watched resource may take to arrive
// before it is reported as not existing, when Config.WatchExpiry is zero
// (C4).
const DefaultWatchExpiry = 15 * time.Second

// Config configures a Client. Its zero values mean the documented defaults.
// The Client does not modify it, nor use it after New returns except for
// the functions it holds.
type Config struct {
	// Node identifies the client to the server. Nil means an empty node.
	// The client adds the client features
	// "xds.config.supports-resource-ttl" and
	// "xds.config.supports-resource-in-sotw" to a copy, and the user agent
	// name "xdsd-client" if it has none.
	Node *corev3.Node
	// Server is the management server's address, given to the transport.
	Server string
	// Transport builds the transport to Server. Nil means gRPC
	// (grpctransport.Builder) with DialOptions.
	Transport TransportBuilder
	// DialOptions are the gRPC dial options of the default transport. They
	// must include transport credentials, e.g.
	// grpc.WithTransportCredentials(insecure.NewCredentials()).
	DialOptions []grpc.DialOption
	// ADS puts every type on one aggregated stream; false opens one
	// per-type stream for each type watched.
	ADS bool
	// Delta uses the incremental protocol; false uses state of the world.
	Delta bool
	// WatchExpiry is how long a watched resource may take to arrive before
	// it is reported as not existing (C4). Zero means DefaultWatchExpiry.
	WatchExpiry time.Duration
	// Backoff returns how long to wait before reconnecting after the
	// retry'th consecutive failure (retry counts from 0). Nil means a
	// jittered exponential backoff, 0.5–1 s at first and 15–30 s at most
	// (DefaultBackoff). The count starts again from 0 after a stream that
	// received a response.
	Backoff func(retry int) time.Duration
	// Validate, if set, is called for every resource of every response
	// before it is accepted; an error rejects (NACKs) the whole response,
	// and the last valid resources stay in force (C1). It is called on a
	// stream's goroutine and must not block; msg must not be modified.
	Validate func(typeURL, name string, msg proto.Message) error

	// LegacyWildcard sends a SotW subscription to nothing but the
	// wildcard as an empty resource_names list, the legacy form of the
	// wildcard (PROTOCOL S8), instead of "*", for as long as the stream
	// has asked for nothing else, for the types that have that form
	// (listeners, clusters and scoped routes: for the others an empty
	// list asks for nothing, and "*" is sent). Some servers, such as
	// go-control-plane v0.14's SotW snapshot cache, take "*" for a
	// resource name. Delta is unaffected; with REST it is an error.
	// When the type's last watch goes, the client sends "*" and then an
	// empty list, which the protocol reads as giving up the wildcard (a
	// server that takes "*" for a name may go on sending everything,
	// which the client then ignores).
	LegacyWildcard bool

	// REST is the base URL of a REST-JSON xDS server, such as
	// "http://127.0.0.1:18001" (C8, PROTOCOL T4). When set, the client
	// polls POST <REST>/v3/discovery:<type> for each type watched instead
	// of opening gRPC streams; Server, Transport and DialOptions are
	// ignored, and ADS and Delta must be false. See resttransport.
	REST string
	// HTTPClient is the HTTP client of REST polling. Nil means a client of
	// the client's own, whose idle connections Close closes.
	HTTPClient *http.Client
	// File is the path of a file holding a DiscoveryResponse in YAML
	// (.yaml, .yml), JSON (.json), binary proto (.pb) or proto text
	// (.pb_text, .txt) (C7, PROTOCOL T5). When set, the client watches
	// that file instead of a server: it delivers the file's resources
	// and every atomic replacement of it, also after its directory is
	// removed and made again; a file that cannot be read or
	// decoded, or that Validate rejects, leaves the last valid resources
	// in force and is reported to OnError. There is no ACK or NACK on
	// this path. Server, Transport, DialOptions and ADS are ignored;
	// Delta must be false, and REST empty (one source or the other).
	File string
}

// ErrClosed is reported to the watcher of a Watch on a closed Client.
var ErrClosed = errors.New("client: closed")

// DefaultBackoff is the backoff used when Config.Backoff is nil: a random
// duration between half and all of min(2^retry s, 30 s).
func DefaultBackoff(retry int) time.Duration {
	d := 30 * time.Second
	if retry < 5 {
		d = time.Second << retry
	}
	return d/2 + rand.N(d/2+1)
}

// Client watches xDS resources on one management server. Create it with
// New; call Close when done.
type Client struct {
	// Read-only after New.
	cfg       Config
	node      *corev3.Node
	transport Transport
	ser       *serializer
	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc

	mu      sync.Mutex         // guards streams and closed
	streams map[string]*stream // by type URL; "" for the ADS stream
	closed  bool
}

// New returns a Client for cfg. It builds the transport but opens no
// stream until the first Watch.
func New(cfg Config) (*Client, error) {
	if err := cfg.useSource(); err != nil {
		return nil, err
	}
	if cfg.Server == "" && cfg.Transport == nil {
		return nil, errors.New("client: Config.Server is empty")
	}
	if cfg.Transport == nil {
		cfg.Transport = grpctransport.Builder{DialOptions: cfg.DialOptions}
	}
	if cfg.WatchExpiry <= 0 {
		cfg.WatchExpiry = DefaultWatchExpiry
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	node := &corev3.Node{}
	if cfg.Node != nil {
		node = proto.Clone(cfg.Node).(*corev3.Node)
	}
	for _, f := range []string{featureResourceTTL, featureResourceInSotw} {
		if !contains(node.ClientFeatures, f) {
			node.ClientFeatures = append(node.ClientFeatures, f)
		}
	}
	if node.UserAgentName == "" {
		node.UserAgentName = "xdsd-client"
	}
	tr, err := cfg.Transport.Build(cfg.Server)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{
		cfg:       cfg,
		node:      node,
		transport: tr,
		ser:       newSerializer(ctx),
		ctx:       ctx,
		cancel:    cancel,
		streams:   make(map[string]*stream),
	}, nil
}

// Watch starts watching the resource of type typeURL named name; name "*"
// or "" watches every resource of the type (a wildcard, meant for
// Listener and Cluster). w is told of the current state if the client
// already has it, then of every change, until cancel is called. After
// cancel returns no new callback for this watch starts. A type that cannot
// be watched (not linked into the binary, or no per-type service) is
// reported to w.OnError. On a closed client, whose callback goroutine has
// ended, Watch reports ErrClosed to w.OnError itself, on the calling
// goroutine, before it returns.
func (c *Client) Watch(typeURL, name string, w Watcher) (cancel func()) {
	if name == "" {
		name = "*"
	}
	wt := &watch{typeURL: typeURL, name: name, w: w, ser: c.ser}
	ti, s, err := c.streamFor(typeURL)
	if errors.Is(err, ErrClosed) {
		w.OnError(err)
		return func() {}
	}
	if err != nil {
		wt.error(err)
		return func() { wt.canceled.Store(true) }
	}
	s.post(func() { s.addWatch(ti, wt) })
	var once sync.Once
	return func() {
		once.Do(func() {
			wt.canceled.Store(true)
			s.post(func() { s.removeWatch(wt) })
		})
	}
}

// streamFor returns the stream that carries typeURL, starting it.
func (c *Client) streamFor(typeURL string) (*typeInfo, *stream, error) {
	ti, err := lookupType(typeURL)
	if err != nil {
		return nil, nil, err
	}
	key := typeURL
	if c.cfg.ADS {
		key = ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, ErrClosed
	}
	if s := c.streams[key]; s != nil {
		return ti, s, nil
	}
	m, err := method(c.cfg.ADS, c.cfg.Delta, typeURL)
	if err != nil {
		return nil, nil, err
	}
	s := newStream(c, m)
	c.streams[key] = s
	return ti, s, nil
}

// streamOf returns the running stream that carries typeURL, or nil.
func (c *Client) streamOf(typeURL string) *stream {
	if c.cfg.ADS {
		typeURL = ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[typeURL]
}

// Close stops every stream, closes the transport and waits for the
// client's goroutines to end. Callbacks not yet started are dropped.
// Close must not be called from a Watcher callback.
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	streams := c.streams
	c.mu.Unlock()
	c.cancel()
	for _, s := range streams {
		<-s.done
	}
	_ = c.transport.Close()
	<-c.ser.done
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
