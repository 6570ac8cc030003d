// Package resttransport is the REST-JSON polling implementation of the xDS
// client's transport boundary (package transport; PROTOCOL T4 and C8).
//
// A Stream stands for one per-type SotW subscription. Each request the
// client sends becomes the poller's current DiscoveryRequest, which it
// POSTs, in canonical proto3 JSON, to <server>/v3/discovery:<type>: a
// DiscoveryResponse (200) is handed to Recv in binary proto, as the client
// core expects, and the poller then waits for the client's next request
// (its ACK or NACK); 304 Not Modified means the long poll ended with no
// change, and the same request is posted again. Any other answer or a
// failed request ends the stream with an error, and the client reconnects
// with its backoff. There is one outstanding request per stream: a new
// request from the client cancels the one in flight.
//
// REST has no stream on which a server could remember a rejection, so two
// fields are filled in for every request: the node (the client sends it
// only on the first request of a stream), and, in a NACK, version_info is
// the rejected version rather than the last accepted one, so that a
// server that holds a request at the current version (as xdsd's does)
// holds the NACK until a newer version exists instead of answering with
// the rejected version again (PROTOCOL S4). There is no ADS and no
// incremental variant over REST: NewStream refuses their methods.
package resttransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client/transport"
)

// MaxResponseBytes bounds a response body.
const MaxResponseBytes = 64 << 20

// paths maps the per-type SotW methods to the REST paths' type names.
var paths = map[string]string{
	"/envoy.service.listener.v3.ListenerDiscoveryService/StreamListeners":                "listeners",
	"/envoy.service.route.v3.RouteDiscoveryService/StreamRoutes":                         "routes",
	"/envoy.service.route.v3.ScopedRoutesDiscoveryService/StreamScopedRoutes":            "scoped-routes",
	"/envoy.service.cluster.v3.ClusterDiscoveryService/StreamClusters":                   "clusters",
	"/envoy.service.endpoint.v3.EndpointDiscoveryService/StreamEndpoints":                "endpoints",
	"/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets":                      "secrets",
	"/envoy.service.runtime.v3.RuntimeDiscoveryService/StreamRuntime":                    "runtime",
	"/envoy.service.extension.v3.ExtensionConfigDiscoveryService/StreamExtensionConfigs": "extension_configs",
}

// Builder builds REST-JSON polling transports.
type Builder struct {
	// Client is the HTTP client. Nil means a client of the transport's
	// own, whose idle connections Close closes. The client should have
	// no Timeout shorter than the server's long-poll wait.
	Client *http.Client
}

var (
	_ transport.Builder   = Builder{}
	_ transport.Transport = (*restTransport)(nil)
	_ transport.Stream    = (*stream)(nil)
)

// Build returns a transport to the REST server whose base URL is server,
// such as "http://127.0.0.1:18001".
func (b Builder) Build(server string) (transport.Transport, error) {
	if !strings.HasPrefix(server, "http://") && !strings.HasPrefix(server, "https://") {
		return nil, fmt.Errorf("resttransport: server %q is not an http:// or https:// URL", server)
	}
	t := &restTransport{base: strings.TrimSuffix(server, "/"), hc: b.Client}
	if t.hc == nil {
		t.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		t.own = true
	}
	return t, nil
}

// restTransport is a transport.Transport to one REST server.
type restTransport struct {
	// Read-only after Build.
	base string
	hc   *http.Client
	own  bool // hc is ours: Close closes its idle connections

	pollers sync.WaitGroup // the streams' goroutines (poll)
}

// NewStream starts the poller of the per-type SotW method's type. It
// polls nothing until the first Send.
func (t *restTransport) NewStream(ctx context.Context, method string) (transport.Stream, error) {
	name, ok := paths[method]
	if !ok {
		return nil, fmt.Errorf("resttransport: no REST variant of %s: REST serves the per-type state-of-the-world APIs only (PROTOCOL T4)", method)
	}
	s := &stream{
		ctx:  ctx,
		url:  t.base + "/v3/discovery:" + name,
		hc:   t.hc,
		kick: make(chan struct{}, 1),
		out:  make(chan result),
	}
	t.pollers.Go(s.poll)
	return s, nil
}

// Close waits for the streams' pollers, which end with their contexts,
// then closes the idle connections of the transport's own HTTP client.
func (t *restTransport) Close() error {
	t.pollers.Wait()
	if t.own {
		t.hc.CloseIdleConnections()
	}
	return nil
}

// stream is one poller. Its goroutine, poll, owns the HTTP requests; Send
// hands it requests under mu, Recv takes its results from out.
type stream struct {
	// Read-only after NewStream.
	ctx  context.Context
	url  string
	hc   *http.Client
	kick chan struct{} // capacity 1: a new request is waiting
	out  chan result   // unbuffered; poll sends, Recv receives

	mu        sync.Mutex // guards the fields below
	req       *discovery.DiscoveryRequest
	gen       int // counts Sends
	node      *corev3.Node
	delivered string // version_info of the last response handed to Recv
}

type result struct {
	msg []byte
	err error
}

// Send makes an encoded DiscoveryRequest the poller's current request. It
// never blocks.
func (s *stream) Send(msg []byte) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	req := new(discovery.DiscoveryRequest)
	if err := proto.Unmarshal(msg, req); err != nil {
		return fmt.Errorf("resttransport: decode request: %w", err)
	}
	s.mu.Lock()
	if req.Node != nil {
		s.node = req.Node
	} else {
		req.Node = s.node
	}
	if req.ErrorDetail != nil {
		req.VersionInfo = s.delivered
	}
	s.req = req
	s.gen++
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// Recv returns the next response, encoded, or the error that ended the
// stream.
func (s *stream) Recv() ([]byte, error) {
	select {
	case r := <-s.out:
		return r.msg, r.err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// current returns the current request and its generation.
func (s *stream) current() (*discovery.DiscoveryRequest, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.req, s.gen
}

// poll is the long-poll loop. It ends with the stream's context, or after
// handing Recv an error.
func (s *stream) poll() {
	posted := 0 // generation of the request last answered with a response
	for {
		// Wait for a request newer than the one last answered.
		req, gen := s.current()
		for req == nil || gen == posted || len(req.GetResourceNames()) == 0 {
			select {
			case <-s.ctx.Done():
				return
			case <-s.kick:
			}
			req, gen = s.current()
		}
		resp, err := s.post(req, gen)
		if s.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errSuperseded) {
			continue
		}
		if err == nil && resp == nil { // 304 Not Modified: poll again
			continue
		}
		r := result{err: err}
		if err == nil {
			r.msg, r.err = proto.Marshal(resp)
			s.mu.Lock()
			s.delivered = resp.GetVersionInfo()
			s.mu.Unlock()
		}
		select {
		case s.out <- r:
		case <-s.ctx.Done():
			return
		}
		if r.err != nil {
			return
		}
		posted = gen
	}
}

var errSuperseded = errors.New("resttransport: superseded by a newer request")

// post posts req, the request of generation gen, and returns the response,
// nil for 304 Not Modified, or errSuperseded if the client sent a newer
// request meanwhile.
func (s *stream) post(req *discovery.DiscoveryRequest, gen int) (*discovery.DiscoveryResponse, error) {
	body, err := protojson.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("resttransport: encode request: %w", err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	type answer struct {
		resp *discovery.DiscoveryResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := s.do(ctx, body)
		done <- answer{resp, err}
	}()
	for {
		select {
		case a := <-done:
			return a.resp, a.err
		case <-s.kick:
			// The kick of req's own Send, which poll did not wait for,
			// is not a newer request: cancelling then could throw away
			// the server's answer, which it would send again.
			if _, now := s.current(); now == gen {
				continue
			}
			cancel()
			<-done
			return nil, errSuperseded
		}
	}
}

// do makes one HTTP request.
func (s *stream) do(ctx context.Context, body []byte) (*discovery.DiscoveryResponse, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("resttransport: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := s.hc.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("resttransport: POST %s: %w", s.url, err)
	}
	defer hresp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(hresp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("resttransport: POST %s: reading response: %w", s.url, err)
	}
	switch {
	case hresp.StatusCode == http.StatusNotModified:
		return nil, nil
	case hresp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("resttransport: POST %s: %s: %s", s.url, hresp.Status, bytes.TrimSpace(truncate(b, 512)))
	case len(b) > MaxResponseBytes:
		return nil, fmt.Errorf("resttransport: POST %s: response larger than %d bytes", s.url, MaxResponseBytes)
	}
	resp := new(discovery.DiscoveryResponse)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, resp); err != nil {
		return nil, fmt.Errorf("resttransport: POST %s: invalid DiscoveryResponse JSON: %w", s.url, err)
	}
	return resp, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
