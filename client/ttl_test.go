package client_test

import (
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

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
func keepalives(tp *tap) int {
	n := 0
	seen := make(map[[2]string]bool) // type URL, version_info
	for _, w := range tp.messages(func(w wire) bool { return !w.sent }) {
		switch m := w.msg.(type) {
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
	forEachVariant(t, func(t *testing.T, v variant) {
		t.Run("C6_heartbeats_keep_the_resource", func(t *testing.T) {
			env := startServer(t)
			publish(env, withTTL(rawxds.Endpoints("a", 1)), withTTL(rawxds.Cluster("a")))
			tp := &tap{}
			c := newClient(t, env.Addr, v, withTap(tp))
			re, rc := newRecorder(), newRecorder()
			defer c.Watch(eds, "a", re)()
			defer c.Watch(cds, "a", rc)()
			if u := re.wantUpdate(t, "a"); u.TTL != ttl {
				t.Fatalf("TTL %v, want %v", u.TTL, ttl)
			}
			rc.wantUpdate(t, "a")
			start := time.Now()
			// Heartbeats or refreshes come every TTL/2 per type: eight of
			// them span at least two TTLs.
			eventually(t, "heartbeats", func() bool { return keepalives(tp) >= 8 })
			if time.Since(start) < ttl {
				t.Fatalf("heartbeats too fast to prove anything")
			}
			re.noneYet(t)
			rc.noneYet(t)
		})

		t.Run("C6_ttl_expiry_removes_the_resource", func(t *testing.T) {
			env := startServer(t)
			publish(env, withTTL(rawxds.Endpoints("a", 1)), rawxds.Endpoints("b", 2))
			tp := &tap{}
			c := newClient(t, env.Addr, v, withTap(tp))
			ra, rb := newRecorder(), newRecorder()
			defer c.Watch(eds, "a", ra)()
			defer c.Watch(eds, "b", rb)()
			ra.wantUpdate(t, "a")
			rb.wantUpdate(t, "b")
			// The server is lost: no more heartbeats.
			tp.setRefuse(true)
			tp.breakStreams()
			start := time.Now()
			ra.wantDNE(t, "a")
			if d := time.Since(start); d > ttl+timeout/2 {
				t.Fatalf("expired after %v", d)
			}
			rb.noneYet(t) // no TTL: kept while the server is away
			// When the server is back, a comes back.
			tp.setRefuse(false)
			ra.wantUpdate(t, "a")
		})
	})
}
