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

// heartbeats counts the heartbeat responses (bodiless resources) a tap saw.
func heartbeats(tp *tap) int {
	n := 0
	for _, w := range tp.messages(func(w wire) bool { return !w.sent }) {
		switch m := w.msg.(type) {
		case *discovery.DeltaDiscoveryResponse:
			for _, r := range m.GetResources() {
				if r.GetResource() == nil && r.GetVersion() != "" {
					n++
				}
			}
		case *discovery.DiscoveryResponse:
			for _, a := range m.GetResources() {
				var r discovery.Resource
				if a.GetTypeUrl() == wrapperType && a.UnmarshalTo(&r) == nil && r.GetResource() == nil {
					n++
				}
			}
		}
	}
	return n
}

const wrapperType = "type.googleapis.com/envoy.service.discovery.v3.Resource"

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
			// Heartbeats come every TTL/2 per type: eight of them span at
			// least two TTLs.
			eventually(t, "heartbeats", func() bool { return heartbeats(tp) >= 8 })
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
