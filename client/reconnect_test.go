package client_test

import (
	"net"
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/server"
)

func TestReconnect(t *testing.T) {
	clienttest.ForEachVariant(t, func(t *testing.T, v clienttest.Variant) {
		t.Run("C5_resumes_with_what_it_has", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
			tp := &clienttest.Tap{}
			c := clienttest.NewClient(t, env.Addr, v, clienttest.WithTap(tp))
			rc, re := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(cds, "*", rc)()
			rc.WantUpdate(t, "a")
			defer c.Watch(eds, "a", re)()
			got := re.WantUpdate(t, "a")
			clienttest.Eventually(t, "EDS ACKed", func() bool {
				ts, ok := typeStatus(env.Server, eds)
				return ok && ts.AckedVersion == ts.SentVersion
			})
			// The versions last accepted, per type (SotW).
			versions := map[string]string{}
			for _, w := range tp.Messages(func(w clienttest.Wire) bool { return w.Sent }) {
				if r, ok := w.Msg.(*discovery.DiscoveryRequest); ok && r.GetErrorDetail() == nil {
					versions[r.GetTypeUrl()] = r.GetVersionInfo()
				}
			}
			before := tp.NumStreams()
			tp.BreakStreams()
			clienttest.Eventually(t, "a new stream", func() bool { return tp.NumStreams() > before })
			first := map[string]clienttest.Wire{}
			clienttest.Eventually(t, "subscriptions resent", func() bool {
				for _, w := range tp.Messages(func(w clienttest.Wire) bool { return w.Sent && w.Stream >= before }) {
					typ := typeURLOf(w)
					if _, ok := first[typ]; !ok {
						first[typ] = w
					}
				}
				return len(first) == 2
			})
			for typ, w := range first {
				name := "*"
				if typ == eds {
					name = "a"
				}
				switch r := w.Msg.(type) {
				case *discovery.DiscoveryRequest:
					if r.GetVersionInfo() != versions[typ] || r.GetVersionInfo() == "" || r.GetResponseNonce() != "" || !slices.Equal(r.GetResourceNames(), []string{name}) {
						t.Errorf("%s: first request on the new stream %v, want version %q, names [%s], no nonce", typ, r, versions[typ], name)
					}
				case *discovery.DeltaDiscoveryRequest:
					if !slices.Equal(r.GetResourceNamesSubscribe(), []string{name}) || r.GetInitialResourceVersions()["a"] == "" || len(r.GetInitialResourceVersions()) != 1 {
						t.Errorf("%s: first request on the new stream %v, want subscribe [%s] and the version of a", typ, r, name)
					}
					if typ == eds && r.GetInitialResourceVersions()["a"] != got.Version {
						t.Errorf("initial version %q, want %q", r.GetInitialResourceVersions()["a"], got.Version)
					}
				}
			}
			// Still watching: a change arrives on the new stream.
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 2))
			if u := re.WantUpdate(t, "a"); clienttest.Port(u) != 2 {
				t.Fatalf("port %d, want 2", clienttest.Port(u))
			}
		})

		t.Run("C5_server_restart_on_the_same_address", func(t *testing.T) {
			c1 := cache.New(nil)
			c1.SetSnapshot("", cache.MustSnapshot(rawxds.Endpoints("a", 1)))
			addr, stop := serve(t, "127.0.0.1:0", c1)
			c := clienttest.NewClient(t, addr, v, nil)
			r := clienttest.NewRecorder()
			defer c.Watch(eds, "a", r)()
			r.WantUpdate(t, "a")
			stop()
			r.WaitFor(t, "error on the lost stream", func(e clienttest.Event) bool { return e.Kind == "error" })
			c2 := cache.New(nil)
			c2.SetSnapshot("", cache.MustSnapshot(rawxds.Endpoints("a", 2)))
			_, stop2 := serve(t, addr, c2)
			defer stop2()
			if u := r.WantUpdate(t, "a"); clienttest.Port(u) != 2 {
				t.Fatalf("port %d, want 2 from the restarted server", clienttest.Port(u))
			}
		})
	})
}

func typeURLOf(w clienttest.Wire) string {
	switch m := w.Msg.(type) {
	case *discovery.DiscoveryRequest:
		return m.GetTypeUrl()
	case *discovery.DeltaDiscoveryRequest:
		return m.GetTypeUrl()
	}
	return ""
}

// serve runs xdsd's server for c on addr until stop (or the test's end).
func serve(t *testing.T, addr string, c *cache.Cache) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	server.New(c, server.Config{}).Register(gs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			gs.Stop()
			<-done
		}
	}
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}
