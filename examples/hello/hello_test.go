package main

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/examples"
	"github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/testutil/xdstest"
)

// TestHello runs the example against an in-process xdsd serving a copy of
// the example configuration whose endpoint is moved to a free port, and
// checks that both calls are answered by the example's backend.
func TestHello(t *testing.T) {
	xdstest.VerifyNoLeaks(t) // first, so that it runs after every other cleanup

	backendAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	dir := copyExampleConfig(t, backendAddr)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	addrs := startXDSD(ctx, t, dir)

	var out bytes.Buffer
	err := run(ctx, options{
		backendAddr: backendAddr,
		xdsServer:   addrs.XDS,
		node:        "hello-test",
		target:      "xds:///hello",
		n:           2,
		interval:    10 * time.Millisecond,
		out:         &out,
	})
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := strings.Count(out.String(), "answered by backend "+backendAddr+"\n"); got != 2 {
		t.Errorf("%d calls answered by %s, want 2", got, backendAddr)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// copyExampleConfig copies the embedded example configuration into a
// temporary directory, with its endpoint 127.0.0.1:50051 replaced by
// backendAddr's port, and returns the directory.
func copyExampleConfig(t *testing.T, backendAddr string) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(backendAddr)
	dir := t.TempDir()
	rewritten := false
	err := fs.WalkDir(examples.Config(), ".", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := fs.ReadFile(examples.Config(), path)
		if err != nil {
			return err
		}
		if path == "endpoints/hello.yaml" {
			s := string(data)
			data = []byte(strings.ReplaceAll(s, "port_value: 50051", "port_value: "+port))
			rewritten = s != string(data)
		}
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rewritten {
		t.Fatal("endpoints/hello.yaml: no port_value 50051 to rewrite")
	}
	return dir
}

// startXDSD runs xdsd on dir (xDS and admin on free ports) until the test
// ends, and returns its addresses once it has loaded the configuration.
func startXDSD(ctx context.Context, t *testing.T, dir string) daemon.Addrs {
	t.Helper()
	dctx, stop := context.WithCancel(context.Background())
	ready := make(chan daemon.Addrs, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- daemon.Run(dctx, daemon.Options{
			ConfigDir: dir,
			XDSAddr:   "127.0.0.1:0",
			AdminAddr: "127.0.0.1:0",
			Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
			Ready:     func(a daemon.Addrs) { ready <- a },
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-errc; err != nil {
			t.Errorf("xdsd: %v", err)
		}
	})
	var addrs daemon.Addrs
	select {
	case addrs = <-ready:
	case err := <-errc:
		errc <- err // for the cleanup
		t.Fatalf("xdsd did not start: %v", err)
	case <-ctx.Done():
		t.Fatal("xdsd did not start in time")
	}

	// Poll /readyz until the configuration is loaded.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get("http://" + addrs.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addrs
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("xdsd not ready in time (last: %v)", err)
		}
	}
}
