package client_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// restExchange is one REST poll as the server saw it.
type restExchange struct {
	path   string
	req    *discovery.DiscoveryRequest
	status int
	resp   *discovery.DiscoveryResponse // nil unless 200
}

// restServer is xdsd's REST handler on httptest with a recording shell
// around it; fail makes it answer 503 while set.
type restServer struct {
	env  *rawxds.Env // its cache and server; its gRPC side is unused
	http *httptest.Server

	mu   sync.Mutex // guards log and fail
	log  []restExchange
	fail bool
}

func startREST(t *testing.T, poll time.Duration) *restServer {
	t.Helper()
	rs := &restServer{env: rawxds.Start(t, cache.New(nil), server.Config{})}
	h := rs.env.Server.RESTHandler(server.RESTConfig{PollTimeout: poll})
	rs.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ex := restExchange{path: r.URL.Path, req: new(discovery.DiscoveryRequest)}
		_ = protojson.Unmarshal(body, ex.req)
		rs.mu.Lock()
		fail := rs.fail
		rs.mu.Unlock()
		if fail {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			ex.status = http.StatusServiceUnavailable
		} else {
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			ex.status = rec.Code
			if rec.Code == http.StatusOK {
				ex.resp = new(discovery.DiscoveryResponse)
				_ = protojson.Unmarshal(rec.Body.Bytes(), ex.resp)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		}
		rs.mu.Lock()
		rs.log = append(rs.log, ex)
		rs.mu.Unlock()
	}))
	t.Cleanup(rs.http.Close)
	return rs
}

func (rs *restServer) setFail(v bool) {
	rs.mu.Lock()
	rs.fail = v
	rs.mu.Unlock()
}

// exchanges returns the recorded polls that match.
func (rs *restServer) exchanges(match func(restExchange) bool) []restExchange {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []restExchange
	for _, ex := range rs.log {
		if match(ex) {
			out = append(out, ex)
		}
	}
	return out
}

func newRESTClient(t *testing.T, rs *restServer, edit func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{
		Node:    rawxds.Node("rest-client"),
		REST:    rs.http.URL,
		Backoff: clienttest.Backoff,
	}
	return clienttest.New(t, cfg, edit)
}

func TestREST(t *testing.T) {
	t.Run("C8_watch_receives_updates_over_rest_json", func(t *testing.T) {
		rs := startREST(t, 5*time.Second)
		publish(rs.env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
		c := newRESTClient(t, rs, nil)
		rc, re := clienttest.NewRecorder(), clienttest.NewRecorder()
		defer c.Watch(cds, "*", rc)()
		defer c.Watch(eds, "a", re)()
		rc.WantUpdate(t, "a")
		if u := re.WantUpdate(t, "a"); clienttest.Port(u) != 1 || u.Version == "" {
			t.Fatalf("update %+v, want port 1 with a version", u)
		}
		publish(rs.env, rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Endpoints("a", 2))
		rc.WantUpdate(t, "b")
		if u := re.WantUpdate(t, "a"); clienttest.Port(u) != 2 {
			t.Fatalf("port %d, want 2", clienttest.Port(u))
		}
		// C3 holds over REST too: a cluster gone from the full state is
		// deleted.
		publish(rs.env, rawxds.Cluster("a"), rawxds.Endpoints("a", 2))
		rc.WantDNE(t, "b")
	})

	t.Run("C8_requests_are_canonical_json_with_node_version_and_names", func(t *testing.T) {
		rs := startREST(t, 20*time.Millisecond)
		publish(rs.env, rawxds.Endpoints("a", 1))
		c := newRESTClient(t, rs, nil)
		r := clienttest.NewRecorder()
		defer c.Watch(eds, "a", r)()
		u := r.WantUpdate(t, "a")
		clienttest.Eventually(t, "the ACK: a poll at the accepted version", func() bool {
			return len(rs.exchanges(func(ex restExchange) bool { return ex.req.GetVersionInfo() == u.Version })) > 0
		})
		for _, ex := range rs.exchanges(func(restExchange) bool { return true }) {
			if ex.path != "/v3/discovery:endpoints" {
				t.Errorf("path %s, want /v3/discovery:endpoints", ex.path)
			}
			if ex.req.GetNode().GetId() != "rest-client" {
				t.Errorf("request %v has no node: REST needs it on every request", ex.req)
			}
			if !slices.Equal(ex.req.GetResourceNames(), []string{"a"}) || ex.req.GetTypeUrl() != eds {
				t.Errorf("request %v, want names [a] of %s", ex.req, eds)
			}
		}
	})

	t.Run("C8_not_modified_keeps_long_polling", func(t *testing.T) {
		rs := startREST(t, 20*time.Millisecond)
		publish(rs.env, rawxds.Endpoints("a", 1))
		c := newRESTClient(t, rs, nil)
		r := clienttest.NewRecorder()
		defer c.Watch(eds, "a", r)()
		r.WantUpdate(t, "a")
		clienttest.Eventually(t, "several 304s", func() bool {
			return len(rs.exchanges(func(ex restExchange) bool { return ex.status == http.StatusNotModified })) >= 3
		})
		r.NoneYet(t)
		publish(rs.env, rawxds.Endpoints("a", 2))
		if u := r.WantUpdate(t, "a"); clienttest.Port(u) != 2 {
			t.Fatalf("port %d, want 2", clienttest.Port(u))
		}
	})

	t.Run("C8_each_request_is_posted_once", func(t *testing.T) {
		// The poller posts a request once, not again because of the
		// notice of its own sending: the server answers each version once.
		rs := startREST(t, time.Minute)
		publish(rs.env, rawxds.Endpoints("a", 1))
		c := newRESTClient(t, rs, nil)
		r := clienttest.NewRecorder()
		defer c.Watch(eds, "a", r)()
		v1 := r.WantUpdate(t, "a")
		publish(rs.env, rawxds.Endpoints("a", 2))
		v2 := r.WantUpdate(t, "a")
		for _, v := range []string{v1.Version, v2.Version} {
			if n := len(rs.exchanges(func(ex restExchange) bool { return ex.resp.GetVersionInfo() == v })); n != 1 {
				t.Fatalf("version %s was answered %d times, want once", v, n)
			}
		}
	})

	t.Run("C8_C1_nack_keeps_last_valid_and_is_not_answered_again", func(t *testing.T) {
		rs := startREST(t, 50*time.Millisecond)
		publish(rs.env, rawxds.Endpoints("a", 1))
		c := newRESTClient(t, rs, func(c *client.Config) { c.Validate = clienttest.RejectPort(2) })
		r := clienttest.NewRecorder()
		defer c.Watch(eds, "a", r)()
		good := r.WantUpdate(t, "a")
		publish(rs.env, rawxds.Endpoints("a", 2))
		e := r.WaitFor(t, "error", func(e clienttest.Event) bool { return e.Kind == "error" })
		if !strings.Contains(e.Err.Error(), "port 2 rejected") {
			t.Fatalf("error %v, want the validation error", e.Err)
		}
		var bad string
		for _, ex := range rs.exchanges(func(ex restExchange) bool { return ex.resp != nil }) {
			bad = ex.resp.GetVersionInfo()
		}
		// The NACK reaches the server with its message, and is held at the
		// rejected version until the long poll ends (304), again and again.
		clienttest.Eventually(t, "NACK held past its poll timeout", func() bool {
			return len(rs.exchanges(func(ex restExchange) bool {
				return ex.req.GetErrorDetail() != nil && strings.Contains(ex.req.GetErrorDetail().GetMessage(), "port 2 rejected") &&
					ex.status == http.StatusNotModified
			})) >= 2
		})
		if n := len(rs.exchanges(func(ex restExchange) bool { return ex.resp.GetVersionInfo() == bad })); n != 1 {
			t.Fatalf("the rejected version %s was answered %d times, want once (S4)", bad, n)
		}
		r.NoneYet(t)
		publish(rs.env, rawxds.Endpoints("a", 3))
		u := r.WantUpdate(t, "a")
		if clienttest.Port(u) != 3 || u.Version == good.Version {
			t.Fatalf("update %+v, want port 3", u)
		}
	})

	t.Run("C8_server_errors_back_off_and_resume", func(t *testing.T) {
		rs := startREST(t, 50*time.Millisecond)
		publish(rs.env, rawxds.Endpoints("a", 1))
		c := newRESTClient(t, rs, nil)
		r := clienttest.NewRecorder()
		defer c.Watch(eds, "a", r)()
		u := r.WantUpdate(t, "a")
		rs.setFail(true)
		e := r.WaitFor(t, "error", func(e clienttest.Event) bool { return e.Kind == "error" })
		if !strings.Contains(e.Err.Error(), "503") {
			t.Fatalf("error %v, want the 503", e.Err)
		}
		rs.setFail(false)
		// Resumes at the version it holds: nothing new to tell.
		clienttest.Eventually(t, "a poll at the held version after the outage", func() bool {
			return len(rs.exchanges(func(ex restExchange) bool {
				return ex.status == http.StatusNotModified && ex.req.GetVersionInfo() == u.Version
			})) > 0
		})
		publish(rs.env, rawxds.Endpoints("a", 2))
		if u := r.WantUpdate(t, "a"); clienttest.Port(u) != 2 {
			t.Fatalf("port %d, want 2", clienttest.Port(u))
		}
	})

	t.Run("C8_every_rest_type_has_its_path", func(t *testing.T) {
		rs := startREST(t, 5*time.Second)
		publish(rs.env) // an empty snapshot: every type has a version
		c := newRESTClient(t, rs, nil)
		want := map[string]string{
			resource.ListenerType:    "listeners",
			resource.RouteType:       "routes",
			resource.ScopedRouteType: "scoped-routes",
			resource.ClusterType:     "clusters",
			resource.EndpointType:    "endpoints",
			resource.SecretType:      "secrets",
			resource.RuntimeType:     "runtime",
			resource.ExtensionType:   "extension_configs",
		}
		for typ := range want {
			defer c.Watch(typ, "x", clienttest.NewRecorder())()
		}
		for typ, name := range want {
			clienttest.Eventually(t, "a poll of "+name, func() bool {
				return len(rs.exchanges(func(ex restExchange) bool {
					return ex.path == "/v3/discovery:"+name && ex.req.GetTypeUrl() == typ && ex.status == http.StatusOK
				})) > 0
			})
		}
	})

	t.Run("C8_no_ads_no_delta_over_rest", func(t *testing.T) {
		for _, cfg := range []client.Config{
			{REST: "http://127.0.0.1:1", ADS: true},
			{REST: "http://127.0.0.1:1", Delta: true},
			{REST: "http://127.0.0.1:1", File: "x.yaml"},
			{REST: "http://127.0.0.1:1", LegacyWildcard: true}, // would never poll a wildcard
		} {
			if c, err := client.New(cfg); err == nil {
				c.Close()
				t.Errorf("New(%+v) succeeded, want an error", cfg)
			}
		}
		r := clienttest.NewRecorder()
		c, err := client.New(client.Config{REST: "http://127.0.0.1:1", Backoff: func(int) time.Duration { return time.Hour }})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// VHDS has no SotW service, so no REST path either.
		defer c.Watch(resource.VirtualHostType, "x", r)()
		r.WaitFor(t, "error", func(e clienttest.Event) bool { return e.Kind == "error" })
	})
}
