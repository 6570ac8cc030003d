package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// startHeld is start with a warm gate that never times out: a gate that
// does not open fails the test (Recv's timeout) rather than opening late.
func startHeld(t *testing.T, rs ...*resource.Resource) *rawxds.Env {
	t.Helper()
	c := cache.New(nil)
	c.SetSnapshot("", cache.MustSnapshot(rs...))
	return rawxds.Start(t, c, server.Config{WarmTimeout: time.Hour})
}

// orderV1 and orderV2 are the before and after of a make-before-break
// change: a new cluster, its endpoints, a listener and its route replace
// the old ones.
func orderV1() []*resource.Resource {
	return []*resource.Resource{rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c1")}
}

func orderV2() []*resource.Resource {
	return []*resource.Resource{rawxds.Cluster("c2"), rawxds.Endpoints("c2", 2), rawxds.RDSListener("l2", "r2"), rawxds.Route("r2", "c2")}
}

func short(typeURL string) string { return resource.Lookup(typeURL).Short }

// envoySotW behaves like Envoy on a SotW ADS stream: wildcard clusters and
// listeners, endpoints for every cluster it holds, routes for every
// listener, and an ACK for every response. It logs what it receives.
type envoySotW struct {
	t     *testing.T
	s     *rawxds.SotW
	last  map[string]*discovery.DiscoveryResponse
	names map[string][]string
	log   []string

	askedLDS bool
}

// envoyModel is envoySotW or envoyDelta: step takes in one response and
// answers as Envoy would; entries is the log of what it took in.
type envoyModel interface {
	step()
	entries() *[]string
}

func (c *envoySotW) entries() *[]string  { return &c.log }
func (c *envoyDelta) entries() *[]string { return &c.log }

func newEnvoySotW(t *testing.T, e *rawxds.Env) *envoySotW {
	c := &envoySotW{t: t, s: e.ADS(t), last: map[string]*discovery.DiscoveryResponse{}, names: map[string][]string{}}
	c.s.Send(req(cds))
	return c
}

func (c *envoySotW) request(typeURL string) *discovery.DiscoveryRequest {
	r := &discovery.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: c.names[typeURL]}
	if last := c.last[typeURL]; last != nil {
		r.VersionInfo, r.ResponseNonce = last.VersionInfo, last.Nonce
	} else {
		r.Node = rawxds.Node("envoy")
	}
	return r
}

func (c *envoySotW) step() {
	r := c.s.Recv()
	names := rawxds.Names(r)
	slices.Sort(names)
	c.log = append(c.log, fmt.Sprintf("%s %s", short(r.TypeUrl), strings.Join(names, ",")))
	c.last[r.TypeUrl] = r
	c.s.Send(c.request(r.TypeUrl))
	if r.TypeUrl == eds && c.last[lds] == nil && !c.askedLDS {
		// Like Envoy: listeners are fetched once clusters have warmed.
		c.askedLDS = true
		c.s.Send(req(lds))
	}
	var dep string
	var want []string
	switch r.TypeUrl {
	case cds:
		dep, want = eds, names
	case lds:
		dep = rds
		for _, a := range r.Resources {
			var l listenerv3.Listener
			if err := a.UnmarshalTo(&l); err != nil {
				c.t.Fatal(err)
			}
			want = append(want, resource.RouteNames(&l)...)
		}
		slices.Sort(want)
	default:
		return
	}
	if !slices.Equal(want, c.names[dep]) {
		c.names[dep] = want
		c.s.Send(c.request(dep))
	}
}

// envoyDelta is envoySotW for an incremental ADS stream.
type envoyDelta struct {
	t    *testing.T
	s    *rawxds.Delta
	held map[string]map[string]bool
	log  []string

	subscribed map[string]map[string]bool // type → names subscribed to

	askedLDS bool
}

func newEnvoyDelta(t *testing.T, e *rawxds.Env) *envoyDelta {
	c := &envoyDelta{t: t, s: e.DeltaADS(t), held: map[string]map[string]bool{}, subscribed: map[string]map[string]bool{}}
	c.s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("envoy"), TypeUrl: cds})
	return c
}

func (c *envoyDelta) step() {
	r := c.s.Recv()
	if c.held[r.TypeUrl] == nil {
		c.held[r.TypeUrl] = map[string]bool{}
	}
	var added, deps []string
	for _, res := range r.Resources {
		added = append(added, res.Name)
		c.held[r.TypeUrl][res.Name] = true
		if res.Resource == nil {
			continue
		}
		switch r.TypeUrl {
		case cds:
			deps = append(deps, res.Name)
		case lds:
			var l listenerv3.Listener
			if err := res.Resource.UnmarshalTo(&l); err != nil {
				c.t.Fatal(err)
			}
			deps = append(deps, resource.RouteNames(&l)...)
		}
	}
	for _, n := range r.RemovedResources {
		delete(c.held[r.TypeUrl], n)
	}
	slices.Sort(added)
	if len(added) > 0 {
		c.log = append(c.log, fmt.Sprintf("%s +%s", short(r.TypeUrl), strings.Join(added, ",")))
	}
	if len(r.RemovedResources) > 0 {
		c.log = append(c.log, fmt.Sprintf("%s -%s", short(r.TypeUrl), strings.Join(r.RemovedResources, ",")))
	}
	c.s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
	if r.TypeUrl == eds && !c.askedLDS {
		c.askedLDS = true // like Envoy: listeners once clusters have warmed
		c.s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: lds})
	}
	dep := map[string]string{cds: eds, lds: rds}[r.TypeUrl]
	if dep == "" {
		return
	}
	var gone []string
	if r.TypeUrl == cds {
		gone = r.RemovedResources
	}
	// Like Envoy, subscribe only to names not subscribed to yet.
	if c.subscribed[dep] == nil {
		c.subscribed[dep] = map[string]bool{}
	}
	deps = slices.DeleteFunc(deps, func(n string) bool { return c.subscribed[dep][n] })
	for _, n := range deps {
		c.subscribed[dep][n] = true
	}
	for _, n := range gone {
		delete(c.subscribed[dep], n)
	}
	if len(deps)+len(gone) > 0 {
		c.s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: dep, ResourceNamesSubscribe: deps, ResourceNamesUnsubscribe: gone})
	}
}

func TestADSOrder(t *testing.T) {
	t.Run("O1_make_before_break_sotw", func(t *testing.T) {
		e := startHeld(t, orderV1()...)
		c := newEnvoySotW(t, e)
		for range 4 {
			c.step()
		}
		want := []string{"cds c1", "eds c1", "lds l1", "rds r1"}
		if !slices.Equal(c.log, want) {
			t.Fatalf("initial sync order = %q, want %q", c.log, want)
		}
		c.log = nil
		publish(e, orderV2()...)
		want = []string{"cds c1,c2", "eds c2", "lds l1,l2", "rds r2", "lds l2", "cds c2"}
		for range want {
			c.step()
		}
		if !slices.Equal(c.log, want) {
			t.Fatalf("make-before-break order = %q, want %q", c.log, want)
		}
	})

	t.Run("O1_make_before_break_delta", func(t *testing.T) {
		e := startHeld(t, orderV1()...)
		c := newEnvoyDelta(t, e)
		for range 4 {
			c.step()
		}
		want := []string{"cds +c1", "eds +c1", "lds +l1", "rds +r1"}
		if !slices.Equal(c.log, want) {
			t.Fatalf("initial sync order = %q, want %q", c.log, want)
		}
		c.log = nil
		publish(e, orderV2()...)
		want = []string{"cds +c2", "eds +c2", "lds +l2", "rds +r2", "lds -l1", "rds -r1", "cds -c1", "eds -c1"}
		for len(c.log) < len(want) {
			c.step()
		}
		if !slices.Equal(c.log, want) {
			t.Fatalf("make-before-break order = %q, want %q", c.log, want)
		}
	})

	// A client that asks for clusters and listeners at once (as a client
	// that reconnects does) asks for the endpoints only once it has the
	// clusters: the listeners wait for them, though the client had not
	// asked for endpoints when the clusters went out.
	t.Run("O1_clusters_and_listeners_asked_together_sotw", func(t *testing.T) {
		e := startHeld(t, orderV1()...)
		c := newEnvoySotW(t, e)
		c.askedLDS = true
		c.s.Send(req(lds))
		for range 4 {
			c.step()
		}
		if want := []string{"cds c1", "eds c1", "lds l1", "rds r1"}; !slices.Equal(c.log, want) {
			t.Fatalf("order = %q, want %q", c.log, want)
		}
	})
	t.Run("O1_clusters_and_listeners_asked_together_delta", func(t *testing.T) {
		e := startHeld(t, orderV1()...)
		c := newEnvoyDelta(t, e)
		c.askedLDS = true
		c.s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: lds})
		for range 4 {
			c.step()
		}
		if want := []string{"cds +c1", "eds +c1", "lds +l1", "rds +r1"}; !slices.Equal(c.log, want) {
			t.Fatalf("order = %q, want %q", c.log, want)
		}
	})

	// A client that reconnects asks at once for everything it held: here
	// the endpoints and routes of a configuration since replaced. A
	// response on the endpoints does not open the gate: only the new
	// clusters' endpoints do.
	t.Run("O1_reconnect_asking_old_names_sotw", func(t *testing.T) {
		e := startHeld(t, orderV2()...)
		c := newEnvoySotW(t, e)
		c.askedLDS = true
		c.names[eds], c.names[rds] = []string{"c1"}, []string{"r1"}
		c.s.Send(c.request(eds))
		c.s.Send(req(lds))
		c.s.Send(c.request(rds))
		for range 4 {
			c.step()
		}
		if want := []string{"cds c2", "eds c2", "lds l2", "rds r2"}; !slices.Equal(c.log, want) {
			t.Fatalf("order = %q, want %q", c.log, want)
		}
	})
	// An incremental client that reconnects holding the current endpoints
	// is sent none: the listeners do not wait for a response on endpoints.
	t.Run("O1_reconnect_holding_current_endpoints_delta", func(t *testing.T) {
		e := startHeld(t, orderV1()...)
		c := newEnvoyDelta(t, e)
		c.askedLDS = true
		c.subscribed[eds] = map[string]bool{"c1": true}
		c.s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"c1"},
			InitialResourceVersions: map[string]string{"c1": rawxds.Endpoints("c1", 1).Version}})
		c.s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: lds})
		for range 3 {
			c.step()
		}
		if want := []string{"cds +c1", "lds +l1", "rds +r1"}; !slices.Equal(c.log, want) {
			t.Fatalf("order = %q, want %q", c.log, want)
		}
	})

	// A client that rejects a cluster of its first clusters response never
	// asks for that cluster's endpoints: the listeners wait only for the
	// endpoints it asks for.
	nacked := []*resource.Resource{rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.Cluster("cbad"),
		rawxds.Endpoints("cbad", 2), rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c1")}
	t.Run("O1_rejected_cluster_does_not_hold_listeners_sotw", func(t *testing.T) {
		s := startHeld(t, nacked...).ADS(t)
		s.Send(req(cds))
		r := s.Recv()
		wantNames(t, r, "c1", "cbad")
		s.Send(nack(r, "", "cbad rejected"))
		s.Send(req(eds, "c1"))
		r = s.Recv()
		wantNames(t, r, "c1")
		s.Send(ack(r, "c1"))
		s.Send(req(lds))
		wantNames(t, s.Recv(), "l1") // with the gate stuck shut, Recv times out
	})
	t.Run("O1_rejected_cluster_does_not_hold_listeners_delta", func(t *testing.T) {
		s := startHeld(t, nacked...).DeltaADS(t)
		s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node("envoy"), TypeUrl: cds})
		r := s.Recv()
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: cds, ResponseNonce: r.Nonce, ErrorDetail: &status.Status{Code: 3, Message: "cbad rejected"}})
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResourceNamesSubscribe: []string{"c1"}})
		r = s.Recv()
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: eds, ResponseNonce: r.Nonce})
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: lds})
		if r := s.Recv(); r.TypeUrl != lds {
			t.Fatalf("got %s, want the listeners", short(r.TypeUrl))
		}
	})

	// A client that rejects every cluster asks for no endpoints at all.
	t.Run("O1_every_cluster_rejected_does_not_hold_listeners_sotw", func(t *testing.T) {
		s := startHeld(t, rawxds.Cluster("cbad"), rawxds.Endpoints("cbad", 2),
			rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "cbad")).ADS(t)
		s.Send(req(cds))
		r := s.Recv()
		wantNames(t, r, "cbad")
		s.Send(nack(r, "", "cbad rejected"))
		s.Send(req(lds))
		wantNames(t, s.Recv(), "l1") // with the gate stuck shut, Recv times out
	})

	// A NACK loosens the gate for the responses sent before it, one of
	// which it rejected, not for those sent after it: a cluster new in a
	// later response holds the listeners until its endpoints are sent.
	t.Run("O1_nack_does_not_loosen_clusters_sent_after_it_sotw", func(t *testing.T) {
		e := startHeld(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c1"))
		s := e.ADS(t)
		s.Send(req(cds))
		s.Send(ack(s.Recv()))
		s.Send(req(eds, "c1"))
		e1 := s.Recv()
		s.Send(ack(e1, "c1"))
		s.Send(req(lds))
		s.Send(ack(s.Recv()))
		s.Send(req(rds, "r1"))
		s.Send(ack(s.Recv(), "r1"))
		more := func(port uint32, rs ...*resource.Resource) {
			publish(e, append([]*resource.Resource{rawxds.Cluster("c1"), rawxds.Endpoints("c1", port), rawxds.Cluster("c2"),
				rawxds.Endpoints("c2", 2), rawxds.Cluster("cbad"), rawxds.Endpoints("cbad", 9)}, rs...)...)
		}
		more(1, rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c1"))
		c2 := s.Recv()
		wantNames(t, c2, "c1", "c2", "cbad")
		more(11, rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c1")) // the endpoints change meanwhile
		e2 := s.Recv()
		wantNames(t, e2, "c1")
		s.Send(ack(e1, "c1", "c2")) // names c2, on the nonce of before e2: not answered
		more(11, rawxds.Cluster("c3"), rawxds.Endpoints("c3", 3), rawxds.RDSListener("l1", "r3"), rawxds.Route("r3", "c3"))
		s.Send(nack(c2, "", "cbad rejected"))
		c3 := s.Recv()
		wantNames(t, c3, "c1", "c2", "c3", "cbad")
		s.Send(ack(e2, "c1", "c2"))
		r := s.Recv()
		wantNames(t, r, "c2")
		s.Send(ack(r, "c1", "c2", "c3"))
		if r = s.Recv(); r.TypeUrl != eds {
			t.Fatalf("got %s %v before the endpoints of c3", short(r.TypeUrl), rawxds.Names(r))
		}
		wantNames(t, r, "c3")
		s.Send(ack(r, "c1", "c2", "c3"))
		s.Send(nack(c3, "", "cbad rejected"))
		wantNames(t, s.Recv(), "l1")
	})

	// A NACK of another type (here the endpoints) says nothing of which
	// dependencies the client will ask for: the listeners still wait for
	// the endpoints of every cluster sent.
	twoClusters := []*resource.Resource{rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.Cluster("c2"),
		rawxds.Endpoints("c2", 2), rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c1")}
	t.Run("O1_nack_of_endpoints_does_not_loosen_the_gate_sotw", func(t *testing.T) {
		s := startHeld(t, twoClusters...).ADS(t)
		s.Send(req(cds))
		r := s.Recv()
		wantNames(t, r, "c1", "c2")
		s.Send(ack(r))
		s.Send(req(eds, "c1"))
		r = s.Recv()
		wantNames(t, r, "c1")
		s.Send(nack(r, "", "c1 rejected", "c1"))
		s.Send(req(lds))
		s.Send(req(eds, "c1", "c2"))
		r = s.Recv()
		if r.TypeUrl != eds {
			t.Fatalf("got %s before the endpoints of c2", short(r.TypeUrl))
		}
		wantNames(t, r, "c2") // c1 as rejected is not sent again
		s.Send(ack(r, "c1", "c2"))
		wantNames(t, s.Recv(), "l1")
	})

	// A cluster whose endpoints come from another config source (a file,
	// an api_config_source of their own) is never followed by an endpoints
	// request on this stream: the listeners do not wait for one.
	t.Run("O1_endpoints_from_another_source_not_waited_for", func(t *testing.T) {
		c := rawxds.Cluster("c1").Message.(*clusterv3.Cluster)
		c = proto.CloneOf(c)
		c.EdsClusterConfig.EdsConfig = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{
			PathConfigSource: &corev3.PathConfigSource{Path: "/etc/envoy/eds.yaml"}}}
		s := startHeld(t, resource.MustNew(c), rawxds.Endpoints("c1", 1), rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c1")).ADS(t)
		s.Send(req(cds))
		wantNames(t, s.Recv(), "c1")
		s.Send(req(lds))
		wantNames(t, s.Recv(), "l1") // with the gate stuck shut, Recv times out
	})

	// One type with one upsert and one removal: the removal does not ride
	// along when the upsert's dependencies are still to be sent (a cluster
	// replaced by another, a listener by one with a new route).
	t.Run("O1_one_cluster_replaced_sotw", func(t *testing.T) {
		e := startHeld(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1))
		c := newEnvoySotW(t, e)
		for range 3 { // cds c1, eds c1, lds (empty)
			c.step()
		}
		c.log = nil
		publish(e, rawxds.Cluster("c2"), rawxds.Endpoints("c2", 2))
		want := []string{"cds c1,c2", "eds c2", "cds c2"}
		for range want {
			c.step()
		}
		if !slices.Equal(c.log, want) {
			t.Fatalf("order = %q, want %q: c1 removed before c2's endpoints were sent", c.log, want)
		}
	})
	t.Run("O1_one_listener_replaced_sotw", func(t *testing.T) {
		base := []*resource.Resource{rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1)}
		e := startHeld(t, append(base, rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c1"))...)
		c := newEnvoySotW(t, e)
		for range 4 {
			c.step()
		}
		c.log = nil
		publish(e, append(base, rawxds.RDSListener("l2", "r2"), rawxds.Route("r2", "c1"))...)
		c.step()
		if want := "lds l1,l2"; c.log[0] != want {
			t.Fatalf("first response %q, want %q: l1 removed before r2 was sent", c.log[0], want)
		}
	})
	t.Run("O1_one_cluster_replaced_delta", func(t *testing.T) {
		e := startHeld(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1))
		c := newEnvoyDelta(t, e)
		for range 2 { // cds +c1, eds +c1
			c.step()
		}
		c.log = nil
		publish(e, rawxds.Cluster("c2"), rawxds.Endpoints("c1", 1), rawxds.Endpoints("c2", 2))
		want := []string{"cds +c2", "eds +c2", "cds -c1"}
		for len(c.log) < len(want) {
			c.step()
		}
		if !slices.Equal(c.log[:len(want)], want) {
			t.Fatalf("order = %q, want %q", c.log, want)
		}
	})

	t.Run("O2_updated_cluster_gets_its_endpoints_again", func(t *testing.T) {
		// An updated cluster warms again and needs its endpoints, changed
		// or not (seed 003: clusters are warmed when updated); Envoy asks
		// with names it already asked for, or, incremental, not at all.
		updated := resource.MustNew(&clusterv3.Cluster{
			Name:                 "c1",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     rawxds.Cluster("c1").Message.(*clusterv3.Cluster).GetEdsClusterConfig(),
			ConnectTimeout:       durationpb.New(7 * time.Second),
		})
		for name, tc := range map[string]struct {
			open func(*testing.T, *rawxds.Env) envoyModel
			want []string
		}{
			"sotw":  {func(t *testing.T, e *rawxds.Env) envoyModel { return newEnvoySotW(t, e) }, []string{"cds c1,c2", "eds c1"}},
			"delta": {func(t *testing.T, e *rawxds.Env) envoyModel { return newEnvoyDelta(t, e) }, []string{"cds +c1", "eds +c1"}},
		} {
			t.Run(name, func(t *testing.T) {
				e := startHeld(t, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.Cluster("c2"), rawxds.Endpoints("c2", 2))
				c := tc.open(t, e)
				for range 3 { // clusters, endpoints, listeners (none)
					c.step()
				}
				*c.entries() = nil
				publish(e, updated, rawxds.Endpoints("c1", 1), rawxds.Cluster("c2"), rawxds.Endpoints("c2", 2))
				for range len(tc.want) {
					c.step()
				}
				if got := *c.entries(); !slices.Equal(got, tc.want) {
					t.Fatalf("after c1's update: %q, want %q", got, tc.want)
				}
			})
		}
	})

	t.Run("O2_O3_listener_waits_for_endpoints_of_new_cluster", func(t *testing.T) {
		// A route switching to a new cluster is sent only after the client
		// has the cluster and its endpoints.
		e := startHeld(t, orderV1()...)
		c := newEnvoySotW(t, e)
		for range 4 {
			c.step()
		}
		c.log = nil
		publish(e, rawxds.Cluster("c1"), rawxds.Endpoints("c1", 1), rawxds.Cluster("c2"), rawxds.Endpoints("c2", 2),
			rawxds.RDSListener("l1", "r1"), rawxds.Route("r1", "c2"))
		want := []string{"cds c1,c2", "eds c2", "rds r1"}
		for range want {
			c.step()
		}
		if !slices.Equal(c.log, want) {
			t.Fatalf("order = %q, want %q", c.log, want)
		}
	})
}
