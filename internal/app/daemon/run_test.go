package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/testutil/poll"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 15 * time.Second

// startDaemon runs the daemon with o on loopback ports until the test
// ends, and returns its addresses once it listens.
func startDaemon(t *testing.T, o Options) Addrs {
	t.Helper()
	o.XDSAddr = "127.0.0.1:0"
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:0"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.ShutdownGrace = 100 * time.Millisecond
	ready := make(chan Addrs, 1)
	o.Ready = func(a Addrs) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case a := <-ready:
		return a
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("the daemon did not start")
	}
	return Addrs{}
}

// eventually polls cond until it holds, failing the test after
// waitTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, waitTimeout, what, cond)
}

// get sends GET path to the admin address with the bearer token, if any,
// and returns the status and body.
func get(t *testing.T, admin, path, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// writeFile writes a file atomically: a hidden temporary file renamed
// into place.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// logBuffer is a log's destination, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// configDump polls GET path (/config_dump and its query) on the admin
// address until it answers 200 with a body that holds every one of want,
// and returns the body.
func configDump(t *testing.T, admin, path string, want ...string) string {
	t.Helper()
	var body string
	eventually(t, "the configuration in "+path, func() bool {
		var code int
		code, body = get(t, admin, path, "")
		if code != http.StatusOK {
			return false
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	})
	return body
}

// adsStreams dials the xDS address addr without TLS and returns a function
// that opens an ADS stream on that connection. The connection and its
// streams end with the test, or after waitTimeout.
func adsStreams(t *testing.T, addr string) func() discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return func() discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
		t.Helper()
		s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}
