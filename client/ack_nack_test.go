package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/client/transport"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/server"
)

// typeStatus returns the server's view of the first stream's type t.
func typeStatus(srv *server.Server, t string) (server.TypeStatus, bool) {
	for _, s := range srv.Status() {
		for _, ts := range s.Types {
			if ts.TypeURL == t {
				return ts, true
			}
		}
	}
	return server.TypeStatus{}, false
}

func TestACKNACK(t *testing.T) {
	clienttest.ForEachVariant(t, func(t *testing.T, v clienttest.Variant) {
		t.Run("C1_every_response_is_acked", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
			c := clienttest.NewClient(t, env.Addr, v, nil)
			rc, re := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(cds, "*", rc)()
			defer c.Watch(eds, "a", re)()
			rc.WantUpdate(t, "a")
			re.WantUpdate(t, "a")
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 2))
			if u := re.WantUpdate(t, "a"); clienttest.Port(u) != 2 {
				t.Fatalf("port %d, want 2", clienttest.Port(u))
			}
			for _, typ := range []string{cds, eds} {
				clienttest.Eventually(t, "server sees "+typ+" ACKed", func() bool {
					ts, ok := typeStatus(env.Server, typ)
					return ok && ts.SentNonce != "" && ts.AckedVersion == ts.SentVersion && ts.NackedVersion == ""
				})
			}
		})

		t.Run("C1_rejected_update_keeps_last_valid", func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Endpoints("a", 1))
			tp := &clienttest.Tap{}
			c := clienttest.NewClient(t, env.Addr, v, func(c *client.Config) {
				c.Validate = clienttest.RejectPort(2)
				c.Transport = tp
			})
			r := clienttest.NewRecorder()
			defer c.Watch(eds, "a", r)()
			good := r.WantUpdate(t, "a")

			publish(env, rawxds.Endpoints("a", 2))
			e := r.WaitFor(t, "error", func(e clienttest.Event) bool { return e.Kind == "error" })
			if !strings.Contains(e.Err.Error(), "port 2 rejected") {
				t.Fatalf("error %v, want the validation error", e.Err)
			}
			clienttest.Eventually(t, "server records the NACK", func() bool {
				ts, _ := typeStatus(env.Server, eds)
				return strings.Contains(ts.NackMessage, "port 2 rejected")
			})

			// The NACK names the rejected response's nonce and, in SotW,
			// the last version accepted.
			resps := tp.Messages(func(w clienttest.Wire) bool { return !w.Sent })
			rejected := resps[len(resps)-1].Msg
			nacks := tp.Messages(func(w clienttest.Wire) bool { return w.Sent && errorDetail(w.Msg) != "" })
			if len(nacks) != 1 {
				t.Fatalf("%d NACKs, want 1", len(nacks))
			}
			if got, want := nonceOf(nacks[0].Msg), respNonce(rejected); got != want {
				t.Errorf("NACK nonce %q, want the rejected response's %q", got, want)
			}
			if sotw, ok := nacks[0].Msg.(*discovery.DiscoveryRequest); ok && sotw.GetVersionInfo() != good.Version {
				t.Errorf("NACK version_info %q, want the last accepted %q", sotw.GetVersionInfo(), good.Version)
			}

			// A new watcher is given the last valid resource.
			r2 := clienttest.NewRecorder()
			defer c.Watch(eds, "a", r2)()
			if u := r2.WantUpdate(t, "a"); clienttest.Port(u) != 1 {
				t.Fatalf("new watcher got port %d, want the last valid 1", clienttest.Port(u))
			}
			// The next valid version is accepted; the rejected one never
			// reached the watcher.
			publish(env, rawxds.Endpoints("a", 3))
			if u := r.WantUpdate(t, "a"); clienttest.Port(u) != 3 {
				t.Fatalf("port %d, want 3", clienttest.Port(u))
			}
		})
	})

	for _, delta := range []bool{false, true} {
		name := "sotw"
		if delta {
			name = "delta"
		}
		t.Run(name+"/C2_resource_named_twice_is_nacked", func(t *testing.T) {
			fs := newFakeServer()
			c := clienttest.NewClient(t, "fake", clienttest.Variant{ADS: true, Delta: delta}, func(c *client.Config) { c.Transport = fs })
			r := clienttest.NewRecorder()
			defer c.Watch(eds, "a", r)()
			st := fs.accept(t)
			st.recv(t)
			a1, a2 := rawxds.Endpoints("a", 1).Body, rawxds.Endpoints("a", 2).Body
			st.respond(t, delta, "1", "n1", a1, a2)
			if msg := errorDetail(st.recv(t)); !strings.Contains(msg, "named twice") {
				t.Fatalf("reply error_detail %q, want a NACK for the duplicate", msg)
			}
			r.WaitFor(t, "error", func(e clienttest.Event) bool { return e.Kind == "error" })
			st.respond(t, delta, "2", "n2", a1)
			if req := st.recv(t); errorDetail(req) != "" || nonceOf(req) != "n2" {
				t.Fatalf("reply %v, want an ACK of n2", req)
			}
			if u := r.WantUpdate(t, "a"); clienttest.Port(u) != 1 {
				t.Fatalf("port %d, want 1", clienttest.Port(u))
			}
		})
	}
}

func errorDetail(m proto.Message) string {
	switch m := m.(type) {
	case *discovery.DiscoveryRequest:
		return m.GetErrorDetail().GetMessage()
	case *discovery.DeltaDiscoveryRequest:
		return m.GetErrorDetail().GetMessage()
	}
	return ""
}

func nonceOf(m proto.Message) string {
	switch m := m.(type) {
	case *discovery.DiscoveryRequest:
		return m.GetResponseNonce()
	case *discovery.DeltaDiscoveryRequest:
		return m.GetResponseNonce()
	}
	return ""
}

func respNonce(m proto.Message) string {
	switch m := m.(type) {
	case *discovery.DiscoveryResponse:
		return m.GetNonce()
	case *discovery.DeltaDiscoveryResponse:
		return m.GetNonce()
	}
	return ""
}

// fakeServer is a transport at the boundary whose streams the test
// scripts, for responses a correct server never sends (C2) or silence.
type fakeServer struct {
	streams chan *fakeStream
}

type fakeStream struct {
	ctx   context.Context
	delta bool
	reqs  chan []byte
	resps chan []byte
}

func newFakeServer() *fakeServer { return &fakeServer{streams: make(chan *fakeStream, 100)} }

func (f *fakeServer) Build(string) (transport.Transport, error) { return f, nil }

func (f *fakeServer) NewStream(ctx context.Context, method string) (transport.Stream, error) {
	s := &fakeStream{ctx: ctx, delta: strings.Contains(method, "/Delta"), reqs: make(chan []byte, 100), resps: make(chan []byte, 100)}
	f.streams <- s
	return s, nil
}

func (f *fakeServer) Close() error { return nil }

func (s *fakeStream) Send(b []byte) error {
	select {
	case s.reqs <- b:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *fakeStream) Recv() ([]byte, error) {
	select {
	case b := <-s.resps:
		return b, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// accept returns the next stream the client opens.
func (f *fakeServer) accept(t *testing.T) *fakeStream {
	t.Helper()
	select {
	case s := <-f.streams:
		return s
	case <-time.After(clienttest.Timeout):
		t.Fatal("no stream opened")
		return nil
	}
}

// recv returns the client's next request, decoded.
func (s *fakeStream) recv(t *testing.T) proto.Message {
	t.Helper()
	select {
	case b := <-s.reqs:
		var m proto.Message = new(discovery.DiscoveryRequest)
		if s.delta {
			m = new(discovery.DeltaDiscoveryRequest)
		}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		return m
	case <-time.After(clienttest.Timeout):
		t.Fatal("no request")
		return nil
	}
}

// respond sends a response of endpoints carrying bodies.
func (s *fakeStream) respond(t *testing.T, delta bool, version, nonce string, bodies ...*anypb.Any) {
	t.Helper()
	var m proto.Message
	if delta {
		d := &discovery.DeltaDiscoveryResponse{TypeUrl: eds, Nonce: nonce, SystemVersionInfo: version}
		for _, b := range bodies {
			d.Resources = append(d.Resources, &discovery.Resource{Name: "a", Version: version, Resource: b})
		}
		m = d
	} else {
		m = &discovery.DiscoveryResponse{TypeUrl: eds, Nonce: nonce, VersionInfo: version, Resources: bodies}
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	s.resps <- b
}
