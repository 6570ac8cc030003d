package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

func restPost(t *testing.T, url string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func restReq(t *testing.T, version string, names ...string) []byte {
	t.Helper()
	b, err := protojson.Marshal(&discovery.DiscoveryRequest{Node: rawxds.Node("rest"), VersionInfo: version, ResourceNames: names})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestREST(t *testing.T) {
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("a"), rawxds.Endpoints("a", 1)))
	srv := server.New(c, server.Config{})
	hs := httptest.NewServer(srv.RESTHandler(server.RESTConfig{PollTimeout: 300 * time.Millisecond}))
	defer hs.Close()

	var first discovery.DiscoveryResponse
	t.Run("T4_rest_json_answers_with_canonical_json", func(t *testing.T) {
		code, body := restPost(t, hs.URL+"/v3/discovery:clusters", restReq(t, ""))
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, body)
		}
		if err := protojson.Unmarshal(body, &first); err != nil {
			t.Fatalf("reply is not DiscoveryResponse JSON: %v\n%s", err, body)
		}
		if first.TypeUrl != cds || len(first.Resources) != 1 || first.VersionInfo == "" {
			t.Fatalf("reply %v", &first)
		}
		code, body = restPost(t, hs.URL+"/v3/discovery:endpoints", restReq(t, "", "a"))
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"clusterName":"a"`)) {
			t.Fatalf("endpoints: %d %s", code, body)
		}
	})

	t.Run("T4_fields_unknown_to_the_server_are_ignored", func(t *testing.T) {
		// A newer client's request may carry fields this server's API
		// version lacks, as a gRPC request's encoding may.
		body := `{"node": {"id": "rest", "aFieldOfTomorrow": 1}, "resourceNames": ["a"], "anotherOne": {"x": [1]}}`
		code, reply := restPost(t, hs.URL+"/v3/discovery:endpoints", []byte(body))
		if code != http.StatusOK || !bytes.Contains(reply, []byte(`"clusterName":"a"`)) {
			t.Fatalf("status %d: %s", code, reply)
		}
	})

	t.Run("T4_current_version_is_held_until_change", func(t *testing.T) {
		done := make(chan *discovery.DiscoveryResponse, 1)
		held := restReq(t, first.VersionInfo)
		go func() {
			resp, err := http.Post(hs.URL+"/v3/discovery:clusters", "application/json", bytes.NewReader(held))
			if err != nil {
				done <- nil
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var r discovery.DiscoveryResponse
			if resp.StatusCode != http.StatusOK || protojson.Unmarshal(b, &r) != nil {
				done <- nil
				return
			}
			done <- &r
		}()
		// Publish until the held poll answers: the poll may arrive before
		// or after the change; either way it must see the new version.
		c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("a"), rawxds.Cluster("b"), rawxds.Endpoints("a", 1)))
		r := <-done
		if r == nil {
			t.Fatal("held poll failed")
		}
		if r.VersionInfo == first.VersionInfo || len(r.Resources) != 2 {
			t.Fatalf("held poll answered %v", r)
		}
	})

	t.Run("T4_not_modified_after_bounded_wait", func(t *testing.T) {
		_, body := restPost(t, hs.URL+"/v3/discovery:clusters", restReq(t, ""))
		var cur discovery.DiscoveryResponse
		if err := protojson.Unmarshal(body, &cur); err != nil {
			t.Fatal(err)
		}
		code, _ := restPost(t, hs.URL+"/v3/discovery:clusters", restReq(t, cur.VersionInfo))
		if code != http.StatusNotModified {
			t.Fatalf("status %d, want 304", code)
		}
	})

	t.Run("T4_nack_is_held_until_change", func(t *testing.T) {
		// The poller holds version v1 and rejects v2: it NACKs with v1 and
		// v2's nonce. Answering at once would send v2 again, to be NACKed
		// again, for as long as v2 is current.
		_, body := restPost(t, hs.URL+"/v3/discovery:clusters", restReq(t, ""))
		var v1, v2 discovery.DiscoveryResponse
		if err := protojson.Unmarshal(body, &v1); err != nil {
			t.Fatal(err)
		}
		c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("a"), rawxds.Cluster("c"), rawxds.Endpoints("a", 1)))
		_, body = restPost(t, hs.URL+"/v3/discovery:clusters", restReq(t, v1.VersionInfo))
		if err := protojson.Unmarshal(body, &v2); err != nil {
			t.Fatal(err)
		}
		if v2.VersionInfo == v1.VersionInfo {
			t.Fatalf("no new version: %s", body)
		}
		nack := func() []byte {
			b, err := protojson.Marshal(&discovery.DiscoveryRequest{
				Node: rawxds.Node("rest"), VersionInfo: v1.VersionInfo, ResponseNonce: v2.Nonce,
				ErrorDetail: &statuspb.Status{Code: 3, Message: "rejected"},
			})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		if code, body := restPost(t, hs.URL+"/v3/discovery:clusters", nack()); code != http.StatusNotModified {
			t.Fatalf("NACK of the current version: status %d (%s), want 304 after the wait", code, body)
		}
		var metrics strings.Builder
		srv.WritePrometheus(&metrics)
		if want := `xdsd_nacks_total{type="cds"} 1`; !strings.Contains(metrics.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics.String())
		}
		c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("a"), rawxds.Cluster("d"), rawxds.Endpoints("a", 1)))
		code, body := restPost(t, hs.URL+"/v3/discovery:clusters", nack())
		var v3 discovery.DiscoveryResponse
		if code != http.StatusOK || protojson.Unmarshal(body, &v3) != nil || v3.VersionInfo == v2.VersionInfo {
			t.Fatalf("NACK once the version changed: status %d (%s), want the new version", code, body)
		}
	})

	t.Run("R1_malformed_rest_requests", func(t *testing.T) {
		for _, tc := range []struct {
			path string
			body string
			want int
		}{
			{"/v3/discovery:clusters", "{not json", http.StatusBadRequest},
			{"/v3/discovery:clusters", `{"typeUrl":"type.googleapis.com/envoy.config.listener.v3.Listener"}`, http.StatusBadRequest},
			{"/v3/discovery:nothing", "{}", http.StatusNotFound},
			{"/v3/discovery:clusters", `{"resourceNames":5}`, http.StatusBadRequest}, // unknown fields are ignored: see above
		} {
			if code, body := restPost(t, hs.URL+tc.path, []byte(tc.body)); code != tc.want {
				t.Errorf("%s %s: status %d (%s), want %d", tc.path, tc.body, code, body, tc.want)
			}
		}
		resp, err := http.Get(hs.URL + "/v3/discovery:clusters")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET: status %d, want 405", resp.StatusCode)
		}
	})
}

// TestRESTSlowClients checks that a REST client that sends its body slowly,
// or does not read its response, loses its connection after the handler's
// deadlines instead of holding it and its goroutine.
func TestRESTSlowClients(t *testing.T) {
	// Responses some tens of MB long, more than loopback's socket buffers
	// hold, so that a write to a client that does not read blocks.
	long := strings.Repeat("x", 64<<10)
	var rs []*resource.Resource
	for i := range 160 {
		rs = append(rs, rawxds.Cluster(fmt.Sprintf("%s-%d", long, i)))
	}
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(rs...))
	srv := server.New(c, server.Config{})
	hs := httptest.NewUnstartedServer(srv.RESTHandler(server.RESTConfig{BodyTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond}))
	closed := make(chan string, 8) // the client's address of each connection closed
	hs.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- c.RemoteAddr().String()
		}
	}
	hs.Start()
	defer hs.Close()

	// send opens a connection and writes head, then the first n bytes of body.
	send := func(t *testing.T, body []byte, n int) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v3/discovery:clusters HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
		if _, err := conn.Write(body[:n]); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	waitClosed := func(t *testing.T, conn net.Conn) {
		t.Helper()
		deadline := time.After(rawxds.Timeout)
		for {
			select {
			case a := <-closed:
				if a == conn.LocalAddr().String() {
					return
				}
			case <-deadline:
				t.Fatal("the server still holds the connection")
			}
		}
	}

	t.Run("R1_rest_body_sent_slowly_is_cut_off", func(t *testing.T) {
		body := restReq(t, "")
		conn := send(t, body, len(body)/2)
		defer conn.Close()
		waitClosed(t, conn)
		b, _ := io.ReadAll(conn)
		if !bytes.HasPrefix(b, []byte("HTTP/1.1 400")) {
			t.Errorf("reply %.80q, want 400", b)
		}
	})

	t.Run("R3_rest_response_not_read_is_cut_off", func(t *testing.T) {
		body := restReq(t, "")
		conn := send(t, body, len(body))
		defer conn.Close()
		waitClosed(t, conn) // not reading meanwhile
		n, _ := io.Copy(io.Discard, conn)
		if n >= int64(len(rs)*len(long)) {
			t.Errorf("read %d bytes, the whole response: the write was not cut off", n)
		}
	})
}

// TestRESTTTL: a poller whose node takes Resource wrappers gets a TTL
// resource wrapped with its TTL (L3), and a poll held at the current
// version is answered again before half the TTL is out (L1, L2); one
// that does not take wrappers gets the bare resource, and its poll waits
// for the poll timeout.
func TestRESTTTL(t *testing.T) {
	const ttl = 200 * time.Millisecond
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(withTTL(rawxds.Endpoints("a", 1), ttl)))
	srv := server.New(c, server.Config{})
	hs := httptest.NewServer(srv.RESTHandler(server.RESTConfig{PollTimeout: time.Hour}))
	defer hs.Close()
	post := func(t *testing.T, version string, features ...string) (int, *discovery.DiscoveryResponse) {
		t.Helper()
		node := rawxds.Node("rest")
		node.ClientFeatures = features
		b, err := protojson.Marshal(&discovery.DiscoveryRequest{Node: node, VersionInfo: version, ResourceNames: []string{"a"}})
		if err != nil {
			t.Fatal(err)
		}
		code, body := restPost(t, hs.URL+"/v3/discovery:endpoints", b)
		var r discovery.DiscoveryResponse
		if code == http.StatusOK {
			if err := protojson.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
		}
		return code, &r
	}

	t.Run("L3_L1_L2_wrapped_and_kept_alive", func(t *testing.T) {
		code, r := post(t, "", "xds.config.supports-resource-in-sotw")
		if code != http.StatusOK || len(r.Resources) != 1 || r.Resources[0].TypeUrl != wrapperType {
			t.Fatalf("status %d, resources %v: want one Resource wrapper", code, r.GetResources())
		}
		var wrapped discovery.Resource
		if err := r.Resources[0].UnmarshalTo(&wrapped); err != nil || wrapped.GetTtl().AsDuration() != ttl || wrapped.Resource == nil {
			t.Fatalf("wrapper %v (%v): want the resource with its TTL", &wrapped, err)
		}
		// Held at the current version: answered again with the resource,
		// long before the hour's poll timeout.
		code, again := post(t, r.VersionInfo, "xds.config.supports-resource-in-sotw")
		if code != http.StatusOK || again.VersionInfo != r.VersionInfo || len(again.Resources) != 1 {
			t.Fatalf("held poll: status %d, %v; want the same version again", code, again)
		}
	})

	t.Run("L3_bare_without_the_feature", func(t *testing.T) {
		code, r := post(t, "")
		if code != http.StatusOK || len(r.Resources) != 1 || r.Resources[0].TypeUrl != eds {
			t.Fatalf("status %d, resources %v: want the bare resource", code, r.GetResources())
		}
	})
}
