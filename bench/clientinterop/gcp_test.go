package clientinterop_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	xdsresource "github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	cds = xdsresource.ClusterType
	eds = xdsresource.EndpointType
)

// gcpServer is go-control-plane's xDS server on loopback, with callbacks
// that record what the client sends.
type gcpServer struct {
	addr string

	mu    sync.Mutex // guards the fields below
	opens int        // streams opened, SotW and delta
	nacks []gcpNACK
	acks  map[string]string // by type URL: the version last ACKed (SotW)
}

// gcpNACK is one NACK as the server's callbacks saw it.
type gcpNACK struct {
	typeURL, nonce, message string
}

func startGCP(t *testing.T, c cachev3.Cache) *gcpServer {
	t.Helper()
	g := &gcpServer{acks: map[string]string{}}
	open := func(context.Context, int64, string) error {
		g.mu.Lock()
		g.opens++
		g.mu.Unlock()
		return nil
	}
	cb := serverv3.CallbackFuncs{
		StreamOpenFunc:      open,
		DeltaStreamOpenFunc: open,
		StreamRequestFunc: func(_ int64, r *discovery.DiscoveryRequest) error {
			g.mu.Lock()
			defer g.mu.Unlock()
			if r.GetErrorDetail() != nil {
				g.nacks = append(g.nacks, gcpNACK{r.GetTypeUrl(), r.GetResponseNonce(), r.GetErrorDetail().GetMessage()})
			} else if r.GetResponseNonce() != "" {
				g.acks[r.GetTypeUrl()] = r.GetVersionInfo()
			}
			return nil
		},
		StreamDeltaRequestFunc: func(_ int64, r *discovery.DeltaDiscoveryRequest) error {
			if r.GetErrorDetail() != nil {
				g.mu.Lock()
				g.nacks = append(g.nacks, gcpNACK{r.GetTypeUrl(), r.GetResponseNonce(), r.GetErrorDetail().GetMessage()})
				g.mu.Unlock()
			}
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // after the server's stop, which rawxds.Serve registers later
	srv := serverv3.NewServer(ctx, c, cb)
	gs := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	clusterservice.RegisterClusterDiscoveryServiceServer(gs, srv)
	endpointservice.RegisterEndpointDiscoveryServiceServer(gs, srv)
	g.addr = rawxds.Serve(t, gs)
	return g
}

func (g *gcpServer) numOpens() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opens
}

// nacksOf returns the NACKs of typeURL whose message contains text.
func (g *gcpServer) nacksOf(typeURL, text string) []gcpNACK {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gcpNACK
	for _, n := range g.nacks {
		if n.typeURL == typeURL && strings.Contains(n.message, text) {
			out = append(out, n)
		}
	}
	return out
}

func (g *gcpServer) ackedVersion(typeURL string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.acks[typeURL]
}

// gcpRes returns the message of an xdsd fixture, for go-control-plane's
// caches.
func gcpRes(r *xdsresource.Resource) types.Resource {
	m, err := r.Body.UnmarshalNew()
	if err != nil {
		panic(err)
	}
	return m
}

// gcpSnapshot returns a snapshot of clusters and endpoints, one endpoint
// port per cluster.
func gcpSnapshot(t *testing.T, version string, ports map[string]uint32) *cachev3.Snapshot {
	t.Helper()
	var cs, es []types.Resource
	for name, p := range ports {
		cs = append(cs, gcpRes(rawxds.Cluster(name)))
		es = append(es, gcpRes(rawxds.Endpoints(name, p)))
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType:  cs,
		resourcev3.EndpointType: es,
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestInteropGCP(t *testing.T) {
	ctx := context.Background()
	clienttest.ForEachVariant(t, func(t *testing.T, v clienttest.Variant) {
		t.Run("snapshot_cache_C1_C3_C5", func(t *testing.T) {
			sc := cachev3.NewSnapshotCache(v.ADS, cachev3.IDHash{}, nil)
			g := startGCP(t, sc)
			node := "test-" + v.Name
			set := func(version string, ports map[string]uint32) {
				if err := sc.SetSnapshot(ctx, node, gcpSnapshot(t, version, ports)); err != nil {
					t.Fatal(err)
				}
			}
			set("1", map[string]uint32{"a": 1})
			tp := &clienttest.Tap{}
			c := clienttest.NewClient(t, g.addr, v, func(c *client.Config) {
				c.Transport = tp
				c.Validate = clienttest.RejectPort(2)
				// go-control-plane's SotW snapshot cache takes "*" for
				// a name; it knows the wildcard by its legacy form only.
				c.LegacyWildcard = true
			})
			rc, re := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(cds, "*", rc)()
			defer c.Watch(eds, "a", re)()
			// The endpoints of every cluster, as Envoy asks: in ADS mode
			// go-control-plane answers only requests naming them all.
			defer c.Watch(eds, "b", clienttest.NewRecorder())()
			rc.WantUpdate(t, "a")
			if u := re.WantUpdate(t, "a"); clienttest.Port(u) != 1 {
				t.Fatalf("port %d, want 1", clienttest.Port(u))
			}
			if !v.Delta {
				clienttest.Eventually(t, "EDS version 1 ACKed", func() bool { return g.ackedVersion(eds) == "1" })
			}

			// C1: go-control-plane's callbacks see the NACK, with the nonce
			// of the response it rejects; the last valid endpoints stay.
			set("2", map[string]uint32{"a": 2})
			e := re.WaitFor(t, "error", func(e clienttest.Event) bool { return e.Kind == "error" })
			if !strings.Contains(e.Err.Error(), "port 2 rejected") {
				t.Fatalf("error %v, want the validation error", e.Err)
			}
			clienttest.Eventually(t, "the server sees the NACK", func() bool { return len(g.nacksOf(eds, "port 2 rejected")) > 0 })
			if n := g.nacksOf(eds, "port 2 rejected")[0]; n.nonce == "" {
				t.Fatalf("NACK %+v carries no nonce", n)
			}

			set("3", map[string]uint32{"a": 3, "b": 3})
			rc.WantUpdate(t, "b")
			u := re.WaitFor(t, "port 3", func(e clienttest.Event) bool { return e.Kind == "update" && clienttest.Port(e.Update) == 3 })
			if u.Name != "a" {
				t.Fatalf("update of %q, want a", u.Name)
			}

			// C3: b is gone from the full state.
			set("4", map[string]uint32{"a": 3})
			rc.WantDNE(t, "b")

			// C5: after a lost connection the client resubscribes and
			// keeps receiving.
			opens := g.numOpens()
			tp.BreakStreams()
			clienttest.Eventually(t, "streams reopened", func() bool { return g.numOpens() > opens })
			set("5", map[string]uint32{"a": 5})
			re.WaitFor(t, "port 5", func(e clienttest.Event) bool { return e.Kind == "update" && clienttest.Port(e.Update) == 5 })
			if !v.Delta {
				clienttest.Eventually(t, "EDS version 5 ACKed", func() bool { return g.ackedVersion(eds) == "5" })
			}
		})

		t.Run("linear_cache_eds", func(t *testing.T) {
			lc := cachev3.NewLinearCache(resourcev3.EndpointType)
			g := startGCP(t, lc)
			if err := lc.UpdateResource("a", gcpRes(rawxds.Endpoints("a", 1))); err != nil {
				t.Fatal(err)
			}
			c := clienttest.NewClient(t, g.addr, v, func(c *client.Config) { c.Validate = clienttest.RejectPort(2) })
			ra, rb := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(eds, "a", ra)()
			defer c.Watch(eds, "b", rb)()
			if u := ra.WantUpdate(t, "a"); clienttest.Port(u) != 1 {
				t.Fatalf("port %d, want 1", clienttest.Port(u))
			}
			if err := lc.UpdateResource("b", gcpRes(rawxds.Endpoints("b", 7))); err != nil {
				t.Fatal(err)
			}
			rb.WantUpdate(t, "b")

			if err := lc.UpdateResource("a", gcpRes(rawxds.Endpoints("a", 2))); err != nil {
				t.Fatal(err)
			}
			ra.WaitFor(t, "error", func(e clienttest.Event) bool {
				return e.Kind == "error" && strings.Contains(e.Err.Error(), "port 2 rejected")
			})
			clienttest.Eventually(t, "the server sees the NACK", func() bool { return len(g.nacksOf(eds, "port 2 rejected")) > 0 })

			if err := lc.UpdateResource("a", gcpRes(rawxds.Endpoints("a", 3))); err != nil {
				t.Fatal(err)
			}
			ra.WaitFor(t, "port 3", func(e clienttest.Event) bool { return e.Kind == "update" && clienttest.Port(e.Update) == 3 })

			if v.Delta {
				// Delta says what was removed; SotW EDS missing means
				// nothing (C3).
				if err := lc.DeleteResource("b"); err != nil {
					t.Fatal(err)
				}
				rb.WantDNE(t, "b")
			}
		})
	})
}
