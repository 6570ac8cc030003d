package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/client/grpctransport"
	xdsdaemon "github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/app/xdsctl"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/etcdstore"
)

// bulkFiles is the number of files of the large apply: far more than one
// etcd transaction takes, so that the apply is a generation switch.
const bulkFiles = 10_000

// TestDaemon_etcd_replicas runs three replicas on one etcd. A 10,000-file
// apply, and the deletion of those files, reach a client of each replica
// in one response: no replica serves part of it. A replica killed, its
// clients (of the client library, which resume with what they hold) move
// to another replica by themselves and are sent nothing they hold (PROTOCOL
// D6, S13), then the next change.
func TestDaemon_etcd_replicas(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	cli := etcd.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitTimeout)
	defer cancel()
	if _, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: serviceFiles(dummyA), Prune: true}); err != nil {
		t.Fatal(err)
	}
	var replicas []*daemonProc
	for i := range 3 {
		replicas = append(replicas, startReady(t, nil, etcdServeArgs(etcd.Endpoint, fmt.Sprintf("r%d", i+1))...))
	}

	t.Run("a_10000_file_apply_reaches_every_replica_whole", func(t *testing.T) {
		var streams []*rawxds.Delta
		for i, d := range replicas {
			c := adsClient(t, d)
			s := rawxds.Open(t, func(ctx context.Context) (grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse], error) {
				return c.DeltaAggregatedResources(ctx)
			})
			s.Send(&discovery.DeltaDiscoveryRequest{Node: rawxds.Node(fmt.Sprintf("bulk-watcher-%d", i)), TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}})
			if r := s.Recv(); !slices.Equal(rawxds.DeltaNames(r), []string{svcCluster}) {
				t.Fatalf("r%d: first response %v, want %s alone", i+1, rawxds.DeltaNames(r), svcCluster)
			} else {
				s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.GetNonce()})
			}
			streams = append(streams, s)
		}
		dir := t.TempDir()
		for i := range bulkFiles {
			writeTestFile(t, filepath.Join(dir, "bulk", fmt.Sprintf("c-%05d.yaml", i)), []byte(staticClusterYAML(fmt.Sprintf("bulk-%05d", i), dummyA)))
		}
		xdsctlOK(ctx, t, "apply", "--etcd-endpoints", etcd.Endpoint, dir)
		for i, s := range streams {
			r := s.RecvWithin(waitTimeout)
			names := rawxds.DeltaNames(r)
			if len(names) != bulkFiles || len(r.GetRemovedResources()) != 0 || !strings.HasPrefix(names[0], "bulk-") {
				t.Fatalf("r%d: the response after the apply holds %d clusters and removes %d, want the %d of the apply", i+1, len(names), len(r.GetRemovedResources()), bulkFiles)
			}
			s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.GetNonce()})
		}
		xdsctlOK(ctx, t, "delete", "--etcd-endpoints", etcd.Endpoint, "bulk/")
		for i, s := range streams {
			r := s.RecvWithin(waitTimeout)
			if n := len(r.GetRemovedResources()); n != bulkFiles || len(r.GetResources()) != 0 {
				t.Fatalf("r%d: the response after the deletion removes %d clusters and sends %d, want %d removed", i+1, n, len(r.GetResources()), bulkFiles)
			}
			s.Close()
		}
	})

	t.Run("a_killed_replicas_clients_resume_elsewhere_sent_nothing_they_hold", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, waitTimeout)
		defer cancel()
		type mover struct {
			node  string
			delta bool
			tap   *recvTap
			e     *envoyLike
		}
		var movers []*mover
		for _, delta := range []bool{true, false} {
			m := &mover{node: fmt.Sprintf("mover-delta-%t", delta), delta: delta, tap: &recvTap{}}
			// The client knows every replica, first the one killed below,
			// and connects to the first that answers.
			res := manual.NewBuilderWithScheme("xdsd-replicas")
			var addrs []resolver.Address
			for _, d := range replicas {
				addrs = append(addrs, resolver.Address{Addr: d.xds})
			}
			res.InitialState(resolver.State{Addresses: addrs})
			m.e = newEnvoyLikeWith(t, client.Config{
				Node:   &corev3.Node{Id: m.node},
				Server: "xdsd-replicas:///fleet",
				Transport: tapBuilder{tap: m.tap, inner: grpctransport.Builder{DialOptions: []grpc.DialOption{
					grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(res)}}},
				ADS:   true,
				Delta: delta,
			})
			defer m.e.close()
			movers = append(movers, m)
		}
		for _, m := range movers {
			eventually(ctx, t, m.node+" holding the service", func() (bool, string) {
				h := m.e.holds()
				return h[svcCluster] == portOf(dummyA), fmt.Sprint(h)
			})
			replicas[0].waitStatus(ctx, t, m.node+" synced on r1", func(s xdsdaemon.StatusReport) bool {
				return nodeSynced(s, m.node)
			})
		}
		marks := make([]int, len(movers))
		for i, m := range movers {
			marks[i] = m.tap.streams()
		}

		replicas[0].kill()
		for _, m := range movers {
			eventually(ctx, t, m.node+" on another replica", func() (bool, string) {
				for _, d := range replicas[1:] {
					st := d.status(ctx, t)
					for _, s := range st.Streams {
						if s.NodeID == m.node && len(s.Types) == 2 {
							return true, ""
						}
					}
				}
				return false, fmt.Sprintf("streams opened %d", m.tap.streams())
			})
		}
		if _, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: map[string][]byte{endpointsFile: []byte(endpointsYAML(svcCluster, dummyB))}}); err != nil {
			t.Fatal(err)
		}
		for i, m := range movers {
			eventually(ctx, t, m.node+" holding the change", func() (bool, string) {
				h := m.e.holds()
				return h[svcCluster] == portOf(dummyB), fmt.Sprint(h)
			})
			// What the resumed streams received. Delta: the change, nothing
			// else (but for the empty response that ends a wildcard's first
			// fetch). SotW: no clusters (a wildcard at its version, S13);
			// the endpoints, which the client names, are sent again, as S13
			// has it: the version alone does not say the client holds
			// every name it asks for.
			eds := resource.Lookup(resource.EndpointType).Short + " " + svcCluster
			var got []string
			for _, r := range m.tap.received(marks[i], m.delta) {
				if !m.delta || strings.Contains(r, " ") {
					got = append(got, r)
				}
			}
			want := []string{eds}
			if !m.delta && len(got) == 2 {
				want = []string{eds, eds}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: after the failover received %q, want %q", m.node, got, want)
			}
		}
	})
}

// TestDaemon_etcd_max_connection_age_spreads_clients: clients that all
// connected to one replica, as after a rolling restart, whose resolver
// then lists every replica (each client in its own order, as DNS
// rotates them), move over the replicas once --max-connection-age ends
// their connections, and are served there.
func TestDaemon_etcd_max_connection_age_spreads_clients(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	cli := etcd.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	if _, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: serviceFiles(dummyA), Prune: true}); err != nil {
		t.Fatal(err)
	}
	var replicas []*daemonProc
	var all []resolver.Address
	for i := range 3 {
		d := startReady(t, nil, etcdServeArgs(etcd.Endpoint, fmt.Sprintf("r%d", i+1),
			"--max-connection-age", "1s", "--max-connection-age-grace", "300ms")...)
		replicas = append(replicas, d)
		all = append(all, resolver.Address{Addr: d.xds})
	}
	const clients = 6
	var resolvers []*manual.Resolver
	var fleet []*envoyLike
	for i := range clients {
		res := manual.NewBuilderWithScheme("xdsd-replicas")
		res.InitialState(resolver.State{Addresses: all[:1]})
		e := newEnvoyLikeWith(t, client.Config{
			Node:        &corev3.Node{Id: fmt.Sprintf("spread-%d", i)},
			Server:      "xdsd-replicas:///fleet",
			DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(res)},
			ADS:         true,
			Delta:       true,
		})
		defer e.close()
		resolvers = append(resolvers, res)
		fleet = append(fleet, e)
	}
	for _, e := range fleet {
		eventually(ctx, t, e.node+" holding the service", func() (bool, string) {
			h := e.holds()
			return h[svcCluster] == portOf(dummyA), fmt.Sprint(h)
		})
	}
	for i, res := range resolvers {
		rotated := append(slices.Clone(all[i%3:]), all[:i%3]...)
		res.UpdateState(resolver.State{Addresses: rotated})
	}
	eventually(ctx, t, "the clients spread over the replicas", func() (bool, string) {
		var counts []int
		for _, d := range replicas {
			n := 0
			for _, s := range d.status(ctx, t).Streams {
				if strings.HasPrefix(s.NodeID, "spread-") {
					n++
				}
			}
			counts = append(counts, n)
		}
		return slices.Equal(counts, []int{2, 2, 2}), fmt.Sprint("streams per replica ", counts)
	})
	if _, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: map[string][]byte{endpointsFile: []byte(endpointsYAML(svcCluster, dummyB))}}); err != nil {
		t.Fatal(err)
	}
	for _, e := range fleet {
		eventually(ctx, t, e.node+" holding the change", func() (bool, string) {
			h := e.holds()
			return h[svcCluster] == portOf(dummyB), fmt.Sprint(h)
		})
	}
}

// xdsctlOK runs xdsctl with args and fails the test unless it succeeds.
func xdsctlOK(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := xdsctl.Run(ctx, args, &out, &errOut); code != 0 {
		t.Fatalf("xdsctl %s = %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String()
}

// nodeSynced reports whether s shows a stream of node with two types, each
// SYNCED.
func nodeSynced(s xdsdaemon.StatusReport, node string) bool {
	for _, st := range s.Streams {
		if st.NodeID != node || len(st.Types) != 2 {
			continue
		}
		if !slices.ContainsFunc(st.Types, func(te xdsdaemon.TypeEntry) bool { return te.State != "SYNCED" }) {
			return true
		}
	}
	return false
}

// recvTap records the responses of the streams of a client-library
// transport (tapBuilder), in the order of the streams.
type recvTap struct {
	mu   sync.Mutex // guards the fields below
	n    int        // streams opened
	msgs []tapped
}

// tapped is one response and the stream (by number) it came on.
type tapped struct {
	stream int
	data   []byte
}

func (t *recvTap) newStream() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	return t.n - 1
}

func (t *recvTap) add(stream int, data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs = append(t.msgs, tapped{stream, data})
}

// streams is how many streams were opened.
func (t *recvTap) streams() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// received describes each response received on the streams from number
// from on: its type's short name and the names of its resources (of a
// delta response, those removed after a "-"), the first three of them.
func (t *recvTap) received(from int, delta bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, m := range t.msgs {
		if m.stream < from {
			continue
		}
		var typ string
		var names []string
		if delta {
			r := &discovery.DeltaDiscoveryResponse{}
			if err := proto.Unmarshal(m.data, r); err != nil {
				panic(err)
			}
			typ, names = r.GetTypeUrl(), rawxds.DeltaNames(r)
			for _, n := range r.GetRemovedResources() {
				names = append(names, "-"+n)
			}
		} else {
			r := &discovery.DiscoveryResponse{}
			if err := proto.Unmarshal(m.data, r); err != nil {
				panic(err)
			}
			typ, names = r.GetTypeUrl(), rawxds.Names(r)
		}
		if len(names) > 3 {
			names = append(names[:3], fmt.Sprintf("and %d more", len(names)-3))
		}
		out = append(out, strings.Join(append([]string{resource.Lookup(typ).Short}, names...), " "))
	}
	return out
}

// tapBuilder is a client transport that records what inner's streams
// receive in tap.
type tapBuilder struct {
	inner client.TransportBuilder
	tap   *recvTap
}

func (b tapBuilder) Build(server string) (client.Transport, error) {
	tr, err := b.inner.Build(server)
	if err != nil {
		return nil, err
	}
	return tapTransport{tr, b.tap}, nil
}

type tapTransport struct {
	client.Transport
	tap *recvTap
}

func (t tapTransport) NewStream(ctx context.Context, method string) (client.Stream, error) {
	s, err := t.Transport.NewStream(ctx, method)
	if err != nil {
		return nil, err
	}
	return &tapStream{Stream: s, tap: t.tap, n: t.tap.newStream()}, nil
}

type tapStream struct {
	client.Stream
	tap *recvTap
	n   int
}

func (s *tapStream) Recv() ([]byte, error) {
	b, err := s.Stream.Recv()
	if err == nil {
		s.tap.add(s.n, b)
	}
	return b, err
}

// portOf is the port of addr, host:port.
func portOf(addr string) uint32 {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		panic(err)
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		panic(err)
	}
	return uint32(p)
}

// staticClusterYAML is a STATIC cluster of one endpoint, addr.
func staticClusterYAML(name, addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf(`resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %s
  type: STATIC
  load_assignment:
    cluster_name: %s
    endpoints:
    - lb_endpoints:
      - endpoint: {address: {socket_address: {address: %q, port_value: %s}}}
`, name, name, host, port)
}
