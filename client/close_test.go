package client_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/internal/testutil/stacks"
)

// TestCloseWaitsForSources: Close returns once the goroutines of the
// sources other than gRPC have ended: a REST poller in the middle of a
// long poll, and a file's watcher.
func TestCloseWaitsForSources(t *testing.T) {
	t.Run("C8_rest_poller", func(t *testing.T) {
		rs := startREST(t, time.Minute) // a poll at the current version is held
		publish(rs.env, rawxds.Endpoints("a", 1))
		c := newRESTClient(t, rs, nil)
		r := clienttest.NewRecorder()
		c.Watch(eds, "a", r)
		u := r.WantUpdate(t, "a")
		clienttest.Eventually(t, "a poll held at the accepted version", func() bool {
			return len(rs.exchanges(func(ex restExchange) bool { return ex.req.GetVersionInfo() == u.Version })) > 0 ||
				len(stacks.In("resttransport.(*stream).post")) > 0
		})
		c.Close()
		if gs := stacks.In("resttransport.(*stream).poll"); len(gs) > 0 {
			t.Errorf("a poller runs after Close:\n%s", gs[0])
		}
	})
	t.Run("C7_file_watcher", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cds.yaml")
		replace(t, path, clusterYAML("1", "a"))
		c := newFileClient(t, path, nil)
		r := clienttest.NewRecorder()
		c.Watch(cds, "*", r)
		r.WantUpdate(t, "a")
		c.Close()
		if gs := stacks.In("client.(*fileStream).run"); len(gs) > 0 {
			t.Errorf("a file's watcher runs after Close:\n%s", gs[0])
		}
	})
}
