package client_test

import (
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
)

// ttl is the TTL of these tests' resources; xdsd heartbeats every half.
const ttl = 300 * time.Millisecond

func withTTL(r *resource.Resource) *resource.Resource {
	return resource.MustNew(r.Message, resource.WithTTL(ttl))
}

// keepalives counts what a tap saw refresh TTLs: in delta, heartbeats
// (bodiless resources); in SotW, resources sent again at a version_info the
// type was sent before (xdsd refreshes SotW TTLs by sending the resources
// again, L1).
func keepalives(tp *clienttest.Tap) int {
	n := 0
	seen := make(map[[2]string]bool) // type URL, version_info
	for _, w := range tp.Messages(func(w clienttest.Wire) bool { return !w.Sent }) {
		switch m := w.Msg.(type) {
		case *discovery.DeltaDiscoveryResponse:
			for _, r := range m.GetResources() {
				if r.GetResource() == nil && r.GetVersion() != "" {
					n++
				}
			}
		case *discovery.DiscoveryResponse:
			k := [2]string{m.GetTypeUrl(), m.GetVersionInfo()}
			if seen[k] {
				n += len(m.GetResources())
			}
			seen[k] = true
		}
	}
	return n
}

func TestTTL(t *testing.T) {
	clienttest.ForEachVariant(t, func(t *testing.T, v clienttest.Variant) {
		t.Run("C6_heartbeats_keep_the_resource", func(t *testing.T) {
			env := startServer(t)
			publish(env, withTTL(rawxds.Endpoints("a", 1)), withTTL(rawxds.Cluster("a")))
			tp := &clienttest.Tap{}
			c := clienttest.NewClient(t, env.Addr, v, clienttest.WithTap(tp))
			re, rc := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(eds, "a", re)()
			defer c.Watch(cds, "a", rc)()
			if u := re.WantUpdate(t, "a"); u.TTL != ttl {
				t.Fatalf("TTL %v, want %v", u.TTL, ttl)
			}
			rc.WantUpdate(t, "a")
			start := time.Now()
			// Heartbeats or refreshes come every TTL/2 per type: eight of
			// them span at least two TTLs.
			clienttest.Eventually(t, "heartbeats", func() bool { return keepalives(tp) >= 8 })
			if time.Since(start) < ttl {
				t.Fatalf("heartbeats too fast to prove anything")
			}
			re.NoneYet(t)
			rc.NoneYet(t)
		})

		t.Run("C6_ttl_expiry_removes_the_resource", func(t *testing.T) {
			env := startServer(t)
			publish(env, withTTL(rawxds.Endpoints("a", 1)), rawxds.Endpoints("b", 2))
			tp := &clienttest.Tap{}
			c := clienttest.NewClient(t, env.Addr, v, clienttest.WithTap(tp))
			ra, rb := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(eds, "a", ra)()
			defer c.Watch(eds, "b", rb)()
			ra.WantUpdate(t, "a")
			rb.WantUpdate(t, "b")
			// The server is lost: no more heartbeats.
			tp.SetRefuse(true)
			tp.BreakStreams()
			start := time.Now()
			ra.WantDNE(t, "a")
			if d := time.Since(start); d > ttl+clienttest.Timeout/2 {
				t.Fatalf("expired after %v", d)
			}
			rb.NoneYet(t) // no TTL: kept while the server is away
			// When the server is back, a comes back.
			tp.SetRefuse(false)
			ra.WantUpdate(t, "a")
		})
	})
}
