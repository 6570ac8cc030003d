package client_test

import (
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// expiry is the watch expiry of these tests.
const expiry = 200 * time.Millisecond

func TestExpiry(t *testing.T) {
	clienttest.ForEachVariant(t, func(t *testing.T, v clienttest.Variant) {
		t.Run("C4_missing_resource_is_reported_and_may_appear_later", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Endpoints("other", 1), rawxds.Listener("other", 1))
			c := clienttest.NewClient(t, env.Addr, v, func(c *client.Config) { c.WatchExpiry = expiry })
			re, rl := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(eds, "a", re)()
			defer c.Watch(lds, "a", rl)()
			// SotW: the expiry; delta: the server's "does not exist" (D5).
			re.WantDNE(t, "a")
			rl.WantDNE(t, "a")
			// A watcher added later is told at once.
			late := clienttest.NewRecorder()
			defer c.Watch(eds, "a", late)()
			late.WantDNE(t, "a")
			publish(env, rawxds.Endpoints("other", 1), rawxds.Listener("other", 1), rawxds.Endpoints("a", 7), rawxds.Listener("a", 7))
			if u := re.WantUpdate(t, "a"); clienttest.Port(u) != 7 {
				t.Fatalf("port %d, want 7", clienttest.Port(u))
			}
			rl.WantUpdate(t, "a")
			late.WantUpdate(t, "a")
		})
	})

	for _, delta := range []bool{false, true} {
		name := "sotw"
		if delta {
			name = "delta"
		}
		t.Run(name+"/C4_silent_server_expires_after_watch_expiry", func(t *testing.T) {
			fs := newFakeServer()
			c := clienttest.NewClient(t, "fake", clienttest.Variant{ADS: true, Delta: delta}, func(c *client.Config) {
				c.Transport = fs
				c.WatchExpiry = expiry
			})
			r := clienttest.NewRecorder()
			start := time.Now()
			defer c.Watch(eds, "a", r)()
			st := fs.accept(t)
			req := st.recv(t)
			if sotw, ok := req.(*discovery.DiscoveryRequest); ok && len(sotw.GetResourceNames()) != 1 {
				t.Fatalf("request %v, want one name", sotw)
			}
			r.WantDNE(t, "a")
			if d := time.Since(start); d < expiry {
				t.Fatalf("reported after %v, before the expiry %v", d, expiry)
			}
			st.respond(t, delta, "1", "n1", rawxds.Endpoints("a", 1).Body)
			r.WantUpdate(t, "a")
		})
	}
}
