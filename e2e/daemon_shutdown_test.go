package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/xdstest"
)

// TestDaemon_shutdown_not_ready: once SIGTERM has come, /readyz answers
// 503 while open streams run out their grace, so that a load balancer
// sends no new clients; /healthz still answers 200.
func TestDaemon_shutdown_not_ready(t *testing.T) {
	t.Parallel()
	addr, _ := xdstest.StartBackend(t)
	cfg := newConfigDir(t)
	cfg.writeService(addr)
	d := startReady(t, nil, append(serveArgs(cfg.dir), "--shutdown-grace=1m")...)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cc := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(d.xds, "node-s"))
	waitBackend(ctx, t, cc, addr) // a stream open: the shutdown waits for it

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		d.stop(t)
	}()
	eventually(ctx, t, "/readyz 503 once shutting down", func() (bool, string) {
		code, body := d.get(ctx, t, "/readyz")
		return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %q", code, body)
	})
	if code, body := d.get(ctx, t, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while shutting down: %d %q, want 200", code, body)
	}
	_ = cc.Close() // the last stream ends: xdsd exits
	<-stopped
}
