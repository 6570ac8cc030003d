//go:build unix

package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/xdstest"
)

// TestDaemon_SIGHUP_rescans: an endpoints file linked from outside the
// config directory and rewritten where it is brings no file event; SIGHUP
// makes xdsd walk the directory and read it, and does not stop xdsd.
func TestDaemon_SIGHUP_rescans(t *testing.T) {
	t.Parallel()
	addrA, _ := xdstest.StartBackend(t)
	addrB, _ := xdstest.StartBackend(t)
	cfg := newConfigDir(t)
	cfg.writeService(addrA)
	outside := filepath.Join(t.TempDir(), "backend.yaml")
	if err := os.WriteFile(outside, []byte(endpointsYAML(svcCluster, addrA)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.remove(endpointsFile)
	if err := os.Symlink(outside, filepath.Join(cfg.dir, endpointsFile)); err != nil {
		t.Fatal(err)
	}
	d := startReady(t, nil, serveArgs(cfg.dir)...)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cc := xdstest.Dial(t, "xds:///"+svcTarget, xdstest.Bootstrap(d.xds, "node-h"))
	waitBackend(ctx, t, cc, addrA)

	if err := os.WriteFile(outside, []byte(endpointsYAML(svcCluster, addrB)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitBackend(ctx, t, cc, addrB)
	callN(ctx, t, cc, addrB, 3)
}
