package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// REST-JSON polling (PROTOCOL T4).

// restPollTimeout is the --rest-poll-timeout of TestDaemon_T4_REST: long
// enough for an edit to be picked up well within it, short enough to wait
// out for a 304.
const restPollTimeout = 3 * time.Second

// TestDaemon_T4_REST polls clusters over REST-JSON: canonical JSON
// answers, a request at the current version held until a file edit, and
// 304 Not Modified when nothing it covers changed.
func TestDaemon_T4_REST(t *testing.T) {
	t.Parallel()
	cfg := newConfigDir(t)
	cfg.writeService(dummyA)
	d := startReady(t, nil, serveArgs(cfg.dir, "--rest-poll-timeout", restPollTimeout.String())...)
	if d.rest == "" {
		t.Fatal("no REST address in the serving log line")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	node := &corev3.Node{Id: "rest-node"}
	url := func(typ string) string { return "http://" + d.rest + "/v3/discovery:" + typ }

	var clusterVersion, listenerVersion string
	if !t.Run("canonical_json", func(t *testing.T) {
		code, body, hdr, err := restPost(ctx, url("clusters"), discoveryRequest(t, node, cds, ""), nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("POST clusters: %d %v %s", code, err, body)
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q, want application/json", ct)
		}
		// Canonical proto3 JSON: lowerCamelCase names, Any with "@type".
		var raw map[string]any
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Fatalf("answer is not JSON: %v\n%s", err, body)
		}
		for _, k := range []string{"versionInfo", "typeUrl", "resources"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("answer has no %q: %s", k, body)
			}
		}
		if bytes.Contains(body, []byte(`"version_info"`)) || bytes.Contains(body, []byte(`"eds_cluster_config"`)) {
			t.Errorf("answer has snake_case field names, want proto3 JSON names: %s", body)
		}
		if rs, _ := raw["resources"].([]any); len(rs) != 1 || rs[0].(map[string]any)["@type"] != cds {
			t.Errorf("answer resources = %v, want one with \"@type\" %q", raw["resources"], cds)
		}
		resp := parseResponse(t, body)
		if resp.TypeUrl != cds {
			t.Errorf("type_url = %q, want %q", resp.TypeUrl, cds)
		}
		want := cfg.byType()[cds]
		sameResources(t, "REST clusters", resp.Resources, want)
		if v := setVersion(want...); resp.VersionInfo != v {
			t.Errorf("version_info = %q, want %q", resp.VersionInfo, v)
		}
		clusterVersion = resp.VersionInfo

		code, body, _, err = restPost(ctx, url("listeners"), discoveryRequest(t, node, "", ""), nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("POST listeners: %d %v %s", code, err, body)
		}
		lresp := parseResponse(t, body)
		sameResources(t, "REST listeners", lresp.Resources, cfg.byType()[lds])
		listenerVersion = lresp.VersionInfo
	}) {
		return
	}

	t.Run("bad_requests", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, body string
			want               int
		}{
			{http.MethodPost, "/v3/discovery:no-such-type", "{}", http.StatusNotFound},
			{http.MethodGet, "/v3/discovery:clusters", "", http.StatusMethodNotAllowed},
			{http.MethodPost, "/v3/discovery:clusters", "{not json", http.StatusBadRequest},
			{http.MethodPost, "/v3/discovery:clusters", `{"typeUrl": "` + lds + `"}`, http.StatusBadRequest},
		} {
			req, err := http.NewRequestWithContext(ctx, tc.method, "http://"+d.rest+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s %q = %d %q, want %d", tc.method, tc.path, tc.body, resp.StatusCode, b, tc.want)
			}
		}
	})

	t.Run("poll_held_until_file_edit", func(t *testing.T) {
		type answer struct {
			code int
			body []byte
			err  error
			took time.Duration
		}
		poll := func(typ, urlType, version string, wrote chan struct{}) <-chan answer {
			ch := make(chan answer, 1)
			body := discoveryRequest(t, node, typ, version)
			go func() {
				start := time.Now()
				code, b, _, err := restPost(ctx, url(urlType), body, wrote)
				ch <- answer{code, b, err, time.Since(start)}
			}()
			return ch
		}
		// Both polls are at the current version. The edit adds a
		// cluster: the clusters poll is answered with it, the listeners
		// poll is not (its resources did not change) and ends in 304.
		cWrote, lWrote := make(chan struct{}), make(chan struct{})
		clusters := poll(cds, "clusters", clusterVersion, cWrote)
		listeners := poll(lds, "listeners", listenerVersion, lWrote)
		for _, ch := range []chan struct{}{cWrote, lWrote} {
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatal("polls not sent")
			}
		}
		cfg.write("cluster2.yaml", clusterYAML("backend2")+endpointsItemYAML("backend2", dummyB))

		var a answer
		select {
		case a = <-clusters:
		case <-ctx.Done():
			t.Fatal("no answer to the held clusters poll")
		}
		if a.err != nil || a.code != http.StatusOK {
			t.Fatalf("held clusters poll: %d %v %s after %v, want 200 with the new cluster", a.code, a.err, a.body, a.took)
		}
		if a.took >= restPollTimeout {
			t.Errorf("held clusters poll answered after %v, want before the poll timeout %v", a.took, restPollTimeout)
		}
		resp := parseResponse(t, a.body)
		want := cfg.byType()[cds]
		sameResources(t, "clusters after the edit", resp.Resources, want)
		if v := setVersion(want...); resp.VersionInfo != v || v == clusterVersion {
			t.Errorf("version_info = %q, want %q (and not the old %q)", resp.VersionInfo, v, clusterVersion)
		}
		t.Logf("held clusters poll answered after %v", a.took)

		select {
		case a = <-listeners:
		case <-ctx.Done():
			t.Fatal("no answer to the held listeners poll")
		}
		if a.err != nil || a.code != http.StatusNotModified || len(a.body) != 0 {
			t.Errorf("listeners poll at the current version: %d %v %q after %v, want 304 Not Modified, empty", a.code, a.err, a.body, a.took)
		}
		if a.took < restPollTimeout {
			t.Errorf("listeners poll at the current version answered after %v, want it held for the poll timeout %v", a.took, restPollTimeout)
		}
	})
}

// discoveryRequest returns a DiscoveryRequest in canonical JSON.
func discoveryRequest(t *testing.T, node *corev3.Node, typeURL, version string) string {
	t.Helper()
	b, err := protojson.Marshal(&discovery.DiscoveryRequest{Node: node, TypeUrl: typeURL, VersionInfo: version})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// restPost POSTs body to url; wrote, if not nil, is closed once the
// request is written.
func restPost(ctx context.Context, url, body string, wrote chan struct{}) (int, []byte, http.Header, error) {
	if wrote != nil {
		var once sync.Once
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) },
		})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

func parseResponse(t *testing.T, body []byte) *discovery.DiscoveryResponse {
	t.Helper()
	var resp discovery.DiscoveryResponse
	if err := protojson.Unmarshal(body, &resp); err != nil {
		t.Fatalf("answer is not a DiscoveryResponse: %v\n%s", err, body)
	}
	return &resp
}
