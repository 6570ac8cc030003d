package client_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// goroutinesIn returns the stacks of the running goroutines that are in
// function fn.
func goroutinesIn(fn string) []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseWaitsForSources: Close returns once the goroutines of the
// sources other than gRPC have ended: a REST poller in the middle of a
// long poll, and a file's watcher.
func TestCloseWaitsForSources(t *testing.T) {
	t.Run("C8_rest_poller", func(t *testing.T) {
		rs := startREST(t, time.Minute) // a poll at the current version is held
		publish(rs.env, rawxds.Endpoints("a", 1))
		c := newRESTClient(t, rs, nil)
		r := newRecorder()
		c.Watch(eds, "a", r)
		u := r.wantUpdate(t, "a")
		eventually(t, "a poll held at the accepted version", func() bool {
			return len(rs.exchanges(func(ex restExchange) bool { return ex.req.GetVersionInfo() == u.Version })) > 0 ||
				len(goroutinesIn("resttransport.(*stream).post")) > 0
		})
		c.Close()
		if gs := goroutinesIn("resttransport.(*stream).poll"); len(gs) > 0 {
			t.Errorf("a poller runs after Close:\n%s", gs[0])
		}
	})
	t.Run("C7_file_watcher", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cds.yaml")
		replace(t, path, clusterYAML("1", "a"))
		c := newFileClient(t, path, nil)
		r := newRecorder()
		c.Watch(cds, "*", r)
		r.wantUpdate(t, "a")
		c.Close()
		if gs := goroutinesIn("client.(*fileStream).run"); len(gs) > 0 {
			t.Errorf("a file's watcher runs after Close:\n%s", gs[0])
		}
	})
}
