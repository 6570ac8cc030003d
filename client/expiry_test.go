package client_test

import (
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// expiry is the watch expiry of these tests.
const expiry = 200 * time.Millisecond

func TestExpiry(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		t.Run("C4_missing_resource_is_reported_and_may_appear_later", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Endpoints("other", 1), rawxds.Listener("other", 1))
			c := newClient(t, env.Addr, v, func(c *client.Config) { c.WatchExpiry = expiry })
			re, rl := newRecorder(), newRecorder()
			defer c.Watch(eds, "a", re)()
			defer c.Watch(lds, "a", rl)()
			// SotW: the expiry; delta: the server's "does not exist" (D5).
			re.wantDNE(t, "a")
			rl.wantDNE(t, "a")
			// A watcher added later is told at once.
			late := newRecorder()
			defer c.Watch(eds, "a", late)()
			late.wantDNE(t, "a")
			publish(env, rawxds.Endpoints("other", 1), rawxds.Listener("other", 1), rawxds.Endpoints("a", 7), rawxds.Listener("a", 7))
			if u := re.wantUpdate(t, "a"); port(u) != 7 {
				t.Fatalf("port %d, want 7", port(u))
			}
			rl.wantUpdate(t, "a")
			late.wantUpdate(t, "a")
		})
	})

	for _, delta := range []bool{false, true} {
		name := "sotw"
		if delta {
			name = "delta"
		}
		t.Run(name+"/C4_silent_server_expires_after_watch_expiry", func(t *testing.T) {
			fs := newFakeServer()
			c := newClient(t, "fake", variant{ads: true, delta: delta}, func(c *client.Config) {
				c.Transport = fs
				c.WatchExpiry = expiry
			})
			r := newRecorder()
			start := time.Now()
			defer c.Watch(eds, "a", r)()
			st := fs.accept(t)
			req := st.recv(t)
			if sotw, ok := req.(*discovery.DiscoveryRequest); ok && len(sotw.GetResourceNames()) != 1 {
				t.Fatalf("request %v, want one name", sotw)
			}
			r.wantDNE(t, "a")
			if d := time.Since(start); d < expiry {
				t.Fatalf("reported after %v, before the expiry %v", d, expiry)
			}
			st.respond(t, delta, "1", "n1", rawxds.Endpoints("a", 1).Body)
			r.wantUpdate(t, "a")
		})
	}
}
