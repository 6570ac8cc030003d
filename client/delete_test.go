package client_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/client/grpctransport"
	"github.com/xdsd/xdsd/client/transport"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

func TestDelete(t *testing.T) {
	clienttest.ForEachVariant(t, func(t *testing.T, v clienttest.Variant) {
		t.Run("C3_listener_missing_from_response_is_deleted", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Listener("a", 1), rawxds.Listener("b", 2))
			c := clienttest.NewClient(t, env.Addr, v, nil)
			all, b := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(lds, "*", all)()
			defer c.Watch(lds, "b", b)()
			got := map[string]bool{all.Next(t).Name: true, all.Next(t).Name: true}
			if !got["a"] || !got["b"] {
				t.Fatalf("wildcard watcher got %v, want a and b", got)
			}
			b.WantUpdate(t, "b")
			publish(env, rawxds.Listener("a", 1))
			all.WantDNE(t, "b")
			b.WantDNE(t, "b")
			// It may come back.
			publish(env, rawxds.Listener("a", 1), rawxds.Listener("b", 3))
			all.WantUpdate(t, "b")
			b.WantUpdate(t, "b")
		})

		t.Run("C3_cluster_deletion_drops_its_endpoints", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1), rawxds.Cluster("b"), rawxds.Endpoints("b", 2))
			c := clienttest.NewClient(t, env.Addr, v, nil)
			rc, ra, rb := clienttest.NewRecorder(), clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(cds, "", rc)()
			rc.Next(t)
			rc.Next(t)
			defer c.Watch(eds, "a", ra)()
			defer c.Watch(eds, "b", rb)()
			ra.WantUpdate(t, "a")
			rb.WantUpdate(t, "b")
			// Cluster a goes; its endpoints stay on the server, but the
			// client drops them with it.
			publish(env, rawxds.Endpoints("a", 1), rawxds.Cluster("b"), rawxds.Endpoints("b", 2))
			rc.WantDNE(t, "a")
			ra.WantDNE(t, "a")
			// Endpoints of b are untouched: a later change of b is the next
			// thing b's watcher hears.
			publish(env, rawxds.Endpoints("a", 1), rawxds.Cluster("b"), rawxds.Endpoints("b", 3))
			if u := rb.WantUpdate(t, "b"); clienttest.Port(u) != 3 {
				t.Fatalf("port %d, want 3", clienttest.Port(u))
			}
		})

		t.Run("C3_endpoints_come_back_with_their_cluster", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
			c := clienttest.NewClient(t, env.Addr, v, nil)
			rc, ra := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(cds, "*", rc)()
			rc.WantUpdate(t, "a")
			defer c.Watch(eds, "a", ra)()
			ra.WantUpdate(t, "a")
			// The cluster goes, its endpoints stay on the server.
			publish(env, rawxds.Endpoints("a", 1))
			rc.WantDNE(t, "a")
			ra.WantDNE(t, "a")
			// The cluster comes back: the client fetches its endpoints
			// again, unchanged on the server.
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
			rc.WantUpdate(t, "a")
			if u := ra.WantUpdate(t, "a"); clienttest.Port(u) != 1 {
				t.Fatalf("port %d, want 1", clienttest.Port(u))
			}
		})

		t.Run("C3_routes_come_back_with_their_listener", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.RDSListener("l", "r"), rawxds.Route("r", "c"))
			c := clienttest.NewClient(t, env.Addr, v, nil)
			rl, rr := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(lds, "*", rl)()
			rl.WantUpdate(t, "l")
			defer c.Watch(rds, "r", rr)()
			rr.WantUpdate(t, "r")
			publish(env, rawxds.Route("r", "c"))
			rl.WantDNE(t, "l")
			rr.WantDNE(t, "r")
			publish(env, rawxds.RDSListener("l", "r"), rawxds.Route("r", "c"))
			rl.WantUpdate(t, "l")
			rr.WantUpdate(t, "r")
		})

		t.Run("C3_listener_deletion_drops_its_routes", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.RDSListener("l", "r"), rawxds.Route("r", "c"), rawxds.Cluster("c"), rawxds.Endpoints("c", 1))
			c := clienttest.NewClient(t, env.Addr, v, nil)
			rl, rr := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(lds, "l", rl)()
			rl.WantUpdate(t, "l")
			defer c.Watch(rds, "r", rr)()
			rr.WantUpdate(t, "r")
			publish(env, rawxds.Route("r", "c"), rawxds.Cluster("c"), rawxds.Endpoints("c", 1))
			rl.WantDNE(t, "l")
			rr.WantDNE(t, "r")
		})
	})

	for _, v := range []clienttest.Variant{clienttest.Variants[1], clienttest.Variants[3]} {
		t.Run(v.Name+"/C3_late_endpoints_of_a_deleted_cluster_are_ignored", func(t *testing.T) {
			// Per-type streams: the endpoints of a cluster may arrive on
			// their stream after the cluster's deletion on its own.
			env := startServer(t)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 1))
			g := newGate()
			c := clienttest.NewClient(t, env.Addr, v, func(cfg *client.Config) { cfg.Transport = g })
			rc, ra, rb := clienttest.NewRecorder(), clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(cds, "*", rc)()
			rc.WantUpdate(t, "a")
			defer c.Watch(eds, "a", ra)()
			defer c.Watch(eds, "b", rb)()
			ra.WantUpdate(t, "a")
			rb.WantUpdate(t, "b")
			g.hold.Store(true)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 2), rawxds.Endpoints("b", 1))
			g.waitHeld(t) // the endpoints a:2, on their way
			publish(env, rawxds.Endpoints("b", 1))
			rc.WantDNE(t, "a")
			ra.WantDNE(t, "a")
			g.release()
			publish(env, rawxds.Endpoints("b", 2))
			if u := rb.WantUpdate(t, "b"); clienttest.Port(u) != 2 { // after a:2 on the same stream
				t.Fatalf("port %d, want 2", clienttest.Port(u))
			}
			ra.NoneYet(t)
		})
	}

	for _, v := range clienttest.Variants[:2] {
		t.Run(v.Name+"/C3_endpoints_missing_from_sotw_response_mean_nothing", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Endpoints("a", 1), rawxds.Endpoints("b", 2))
			c := clienttest.NewClient(t, env.Addr, v, nil)
			ra, rb := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(eds, "a", ra)()
			defer c.Watch(eds, "b", rb)()
			ra.WantUpdate(t, "a")
			rb.WantUpdate(t, "b")
			publish(env, rawxds.Endpoints("a", 5)) // the response carries a alone
			if u := ra.WantUpdate(t, "a"); clienttest.Port(u) != 5 {
				t.Fatalf("port %d, want 5", clienttest.Port(u))
			}
			publish(env, rawxds.Endpoints("a", 6))
			ra.WantUpdate(t, "a") // barrier: b's watcher would have heard by now
			rb.NoneYet(t)
		})
	}
}

// gate is a transport.Builder around the gRPC transport that can hold the
// responses of the endpoints streams, as a slow network would.
type gate struct {
	hold   atomic.Bool   // hold the next responses on endpoints streams
	held   chan struct{} // capacity 1: a response is held
	opened chan struct{} // closed by release
	once   sync.Once     // guards the close of opened
}

func newGate() *gate {
	return &gate{held: make(chan struct{}, 1), opened: make(chan struct{})}
}

// release lets the held responses through, and the later ones.
func (g *gate) release() {
	g.once.Do(func() {
		g.hold.Store(false)
		close(g.opened)
	})
}

func (g *gate) waitHeld(t *testing.T) {
	t.Helper()
	clienttest.Eventually(t, "a held response", func() bool { return len(g.held) > 0 })
}

func (g *gate) Build(server string) (transport.Transport, error) {
	inner, err := grpctransport.Builder{DialOptions: clienttest.DialOptions}.Build(server)
	if err != nil {
		return nil, err
	}
	return &gateTransport{Transport: inner, g: g}, nil
}

type gateTransport struct {
	transport.Transport
	g *gate
}

func (gt *gateTransport) NewStream(ctx context.Context, method string) (transport.Stream, error) {
	s, err := gt.Transport.NewStream(ctx, method)
	if err != nil || !strings.Contains(method, "Endpoint") {
		return s, err
	}
	return &gateStream{Stream: s, g: gt.g, ctx: ctx}, nil
}

type gateStream struct {
	transport.Stream
	g   *gate
	ctx context.Context
}

func (s *gateStream) Recv() ([]byte, error) {
	b, err := s.Stream.Recv()
	if err != nil || !s.g.hold.Load() {
		return b, err
	}
	select {
	case s.g.held <- struct{}{}:
	default:
	}
	select {
	case <-s.g.opened:
		return b, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}
