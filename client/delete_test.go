package client_test

import (
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

func TestDelete(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		t.Run("C3_listener_missing_from_response_is_deleted", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Listener("a", 1), rawxds.Listener("b", 2))
			c := newClient(t, env.Addr, v, nil)
			all, b := newRecorder(), newRecorder()
			defer c.Watch(lds, "*", all)()
			defer c.Watch(lds, "b", b)()
			got := map[string]bool{all.next(t).name: true, all.next(t).name: true}
			if !got["a"] || !got["b"] {
				t.Fatalf("wildcard watcher got %v, want a and b", got)
			}
			b.wantUpdate(t, "b")
			publish(env, rawxds.Listener("a", 1))
			all.wantDNE(t, "b")
			b.wantDNE(t, "b")
			// It may come back.
			publish(env, rawxds.Listener("a", 1), rawxds.Listener("b", 3))
			all.wantUpdate(t, "b")
			b.wantUpdate(t, "b")
		})

		t.Run("C3_cluster_deletion_drops_its_endpoints", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1), rawxds.Cluster("b"), rawxds.Endpoints("b", 2))
			c := newClient(t, env.Addr, v, nil)
			rc, ra, rb := newRecorder(), newRecorder(), newRecorder()
			defer c.Watch(cds, "", rc)()
			rc.next(t)
			rc.next(t)
			defer c.Watch(eds, "a", ra)()
			defer c.Watch(eds, "b", rb)()
			ra.wantUpdate(t, "a")
			rb.wantUpdate(t, "b")
			// Cluster a goes; its endpoints stay on the server, but the
			// client drops them with it.
			publish(env, rawxds.Endpoints("a", 1), rawxds.Cluster("b"), rawxds.Endpoints("b", 2))
			rc.wantDNE(t, "a")
			ra.wantDNE(t, "a")
			// Endpoints of b are untouched: a later change of b is the next
			// thing b's watcher hears.
			publish(env, rawxds.Endpoints("a", 1), rawxds.Cluster("b"), rawxds.Endpoints("b", 3))
			if u := rb.wantUpdate(t, "b"); port(u) != 3 {
				t.Fatalf("port %d, want 3", port(u))
			}
		})

		t.Run("C3_listener_deletion_drops_its_routes", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.RDSListener("l", "r"), rawxds.Route("r", "c"), rawxds.Cluster("c"), rawxds.Endpoints("c", 1))
			c := newClient(t, env.Addr, v, nil)
			rl, rr := newRecorder(), newRecorder()
			defer c.Watch(lds, "l", rl)()
			rl.wantUpdate(t, "l")
			defer c.Watch(rds, "r", rr)()
			rr.wantUpdate(t, "r")
			publish(env, rawxds.Route("r", "c"), rawxds.Cluster("c"), rawxds.Endpoints("c", 1))
			rl.wantDNE(t, "l")
			rr.wantDNE(t, "r")
		})
	})

	for _, v := range variants[:2] {
		t.Run(v.name+"/C3_endpoints_missing_from_sotw_response_mean_nothing", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 2))
			c := newClient(t, env.Addr, v, nil)
			ra, rb := newRecorder(), newRecorder()
			defer c.Watch(eds, "a", ra)()
			defer c.Watch(eds, "b", rb)()
			ra.wantUpdate(t, "a")
			rb.wantUpdate(t, "b")
			publish(env, rawxds.Endpoints("a", 5)) // the response carries a alone
			if u := ra.wantUpdate(t, "a"); port(u) != 5 {
				t.Fatalf("port %d, want 5", port(u))
			}
			publish(env, rawxds.Endpoints("a", 6))
			ra.wantUpdate(t, "a") // barrier: b's watcher would have heard by now
			rb.noneYet(t)
		})
	}
}
