package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsd/xdsd/resource"
)

// restTypes maps the REST paths' type names to types (PROTOCOL T4).
var restTypes = map[string]*resource.Type{
	"listeners":         ldsType,
	"routes":            rdsType,
	"scoped-routes":     srdsType,
	"clusters":          cdsType,
	"endpoints":         edsType,
	"secrets":           sdsType,
	"runtime":           rtdsType,
	"extension_configs": ecdsType,
}

// RESTConfig configures the REST-JSON handler.
type RESTConfig struct {
	// PollTimeout bounds how long a request at the current version is held
	// waiting for a change before it is answered 304 Not Modified. Zero
	// means 30 seconds.
	PollTimeout time.Duration
	// MaxBodyBytes bounds a request body. Zero means 4 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds the time to read a request's body, so that a
	// client that sends its body slowly, or not at all, does not hold the
	// connection and its goroutine. Zero means 10 seconds.
	BodyTimeout time.Duration
	// WriteTimeout bounds the time to write a response, so that a client
	// that does not read it does not hold the connection. Zero means 30
	// seconds.
	WriteTimeout time.Duration
}

// RESTHandler serves REST-JSON polling (PROTOCOL T4): POST
// /v3/discovery:<type> with a DiscoveryRequest in canonical proto3 JSON is
// answered with a DiscoveryResponse in the same encoding. A request whose
// version_info is already current is held until something it covers
// changes, or for PollTimeout, after which it is answered 304 Not Modified.
// So is a NACK (error_detail set) while the version it rejects, named by
// its response_nonce, is current: the seed's long polling sends nothing
// until the resources change, and the rejected ones again would be NACKed
// again. A poller whose node takes Resource wrappers (L3) gets TTL
// resources wrapped with their TTL, and a held poll that covers any is
// answered with them again before half the shortest TTL is out, which
// keeps them alive (L1, L2). There is no ADS and no incremental variant
// over REST.
func (s *Server) RESTHandler(cfg RESTConfig) http.Handler {
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 10 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveREST(w, r, cfg)
	})
}

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request, cfg RESTConfig) {
	name, ok := strings.CutPrefix(r.URL.Path, "/v3/discovery:")
	t := restTypes[name]
	if !ok || t == nil {
		http.Error(w, fmt.Sprintf("unknown path %q: use POST /v3/discovery:<type> with type one of listeners, routes, scoped-routes, clusters, endpoints, secrets, runtime, extension_configs", r.URL.Path), http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	// The deadlines are the connection's, set per request: the server's
	// ReadTimeout and WriteTimeout would also bound the long poll.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(cfg.BodyTimeout)) // fails only where unsupported (HTTP/2 without them)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.MaxBodyBytes))
	if err != nil {
		code := http.StatusBadRequest // the client's body broke off, timed out, or its connection
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			code = http.StatusRequestEntityTooLarge
		}
		// The deadline stays, and the connection closes after the reply:
		// the server would otherwise wait for the rest of the body.
		w.Header().Set("Connection", "close")
		http.Error(w, "reading request: "+err.Error(), code)
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	var req discovery.DiscoveryRequest
	// Fields this server does not know, which a newer client may send, are
	// ignored, as they are in the binary encoding of a gRPC request.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &req); err != nil {
		http.Error(w, "invalid DiscoveryRequest JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	if req.TypeUrl != "" && req.TypeUrl != t.URL {
		http.Error(w, fmt.Sprintf("type_url %q does not match path type %s", req.TypeUrl, t.URL), http.StatusBadRequest)
		return
	}
	node := keptNode(req.GetNode())
	if err := s.authorize(restContext(r), node, "rest/"+t.Short); err != nil {
		http.Error(w, status.Convert(err).Message(), http.StatusForbidden)
		return
	}
	var rejected string // the version a NACK rejects, not sent again until something changes
	if req.ErrorDetail != nil {
		s.log.Warn("REST NACK", "type", t.Short, "node", clip(req.GetNode().GetId()), "message", nackText(req.GetErrorDetail().GetMessage()))
		s.metrics.nacks[t.Order].Add(1)
		rejected = restNonceVersion(req.GetResponseNonce())
	}
	wrap := wrapsTTL(req.GetNode())
	watcher := s.cache.Watch(node)
	defer watcher.Close()
	timeout := time.NewTimer(cfg.PollTimeout)
	defer timeout.Stop()
	var held *discovery.DiscoveryResponse // the current response, while the poll is held
	var beat <-chan time.Time             // when held's TTL resources need refreshing
	for {
		if snap, _, _ := watcher.Take(); snap != nil {
			resp, ttl := s.current(snap, t, req.GetResourceNames(), wrap)
			if resp.VersionInfo != req.GetVersionInfo() && resp.VersionInfo != rejected {
				s.writeREST(w, rc, resp, cfg)
				return
			}
			held = resp
			if ttl > 0 && beat == nil && rejected == "" {
				// The poller holds TTL resources: answered again before
				// half the TTL is out, it keeps them (L1, L2), as a SotW
				// stream's heartbeat resends them.
				hb := time.NewTimer(max(ttl/2, minHeartbeat))
				defer hb.Stop()
				beat = hb.C
			}
		}
		select {
		case <-watcher.Kick():
		case <-beat:
			s.writeREST(w, rc, held, cfg)
			return
		case <-timeout.C:
			w.WriteHeader(http.StatusNotModified)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// writeREST writes resp as a REST poll's answer; its nonce names its
// version (see restNonceSep).
func (s *Server) writeREST(w http.ResponseWriter, rc *http.ResponseController, resp *discovery.DiscoveryResponse, cfg RESTConfig) {
	resp.Nonce += restNonceSep + resp.VersionInfo
	b, err := protojson.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.metrics.responses.Add(1)
	_ = rc.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// restNonceSep joins a REST response's nonce, a number, to its version:
// a poller NACKs with the version it holds, and names the response it
// rejects only by its nonce (PROTOCOL T4).
const restNonceSep = "-"

// restNonceVersion returns the version a REST response nonce names, or ""
// if it names none (a nonce from no REST response of this server).
func restNonceVersion(nonce string) string {
	n, version, ok := strings.Cut(nonce, restNonceSep)
	if !ok || n == "" || strings.Trim(n, "0123456789") != "" {
		return ""
	}
	return version
}
