package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/internal/testutil/xdstest"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

const (
	// waitTimeout bounds each subtest's waits; generous because the
	// machine may be loaded (-race, shared cores). Polls end as soon as
	// their condition holds.
	waitTimeout = 30 * time.Second
	// quickTimeout bounds a wait whose answer comes within milliseconds of
	// its cause, or never.
	quickTimeout = 10 * time.Second
	// pollEvery is the interval between two looks at the server's status.
	pollEvery = 5 * time.Millisecond
)

// Short names for the four type URLs grpc-go subscribes to.
const (
	lds = xdstest.ListenerType
	rds = xdstest.RouteConfigType
	cds = xdstest.ClusterType
	eds = xdstest.EndpointsType
)

// TestGRPCXDS drives grpc-go's own xDS resolver ("xds:///<listener>") and
// xDS client against xdsd over loopback: grpc-go speaks SotW ADS only.
func TestGRPCXDS(t *testing.T) {
	t.Run("T1_ads_sotw_with_grpc_go", testADSSotW)
	t.Run("N1_node_groups", testNodeGroups)
}

// testADSSotW walks one grpc-go channel through a first config, an
// endpoint move, a NACKed listener and its fix, on one ADS stream.
func testADSSotW(t *testing.T) {
	addrA, _ := xdstest.StartBackend(t)
	addrB, _ := xdstest.StartBackend(t)
	e := startXDSD(t)

	const (
		target = "svc.e2e.example"
		node   = "grpc-go-node"
	)
	base := xdstest.DefaultResources(target, addrA)
	listener := mustRes(t, base.Listener)
	route := mustRes(t, base.RouteConfig)
	cluster := mustRes(t, base.Cluster)
	endpointsA := mustRes(t, base.Endpoints)
	e.publish(t, node, listener, route, cluster, endpointsA)

	cc := xdstest.Dial(t, "xds:///"+target, xdstest.Bootstrap(e.addr, node))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	// Steps share the channel and the stream: each runs only if the one
	// before passed.
	var streamID uint64

	if !t.Run("rpc_answered_by_A", func(t *testing.T) {
		// Fail-fast: waits while the channel resolves, fails on
		// TRANSIENT_FAILURE.
		id, err := xdstest.CallBackend(ctx, cc)
		if err != nil {
			t.Fatalf("first RPC: %v", err)
		}
		if id != addrA {
			t.Fatalf("first RPC answered by %q, want backend A %q", id, addrA)
		}
		st := e.waitSteady(ctx, t, node, map[string]string{
			lds: setVersion(listener),
			rds: setVersion(route),
			cds: setVersion(cluster),
			eds: setVersion(endpointsA),
		})
		streamID = st.ID
		t.Logf("stream %d: %s", st.ID, fmtStream(st))
	}) {
		return
	}

	endpointsB := mustRes(t, xdstest.Endpoints(cluster.Name, addrB))
	if !t.Run("endpoints_move_to_B", func(t *testing.T) {
		e.publish(t, node, listener, route, cluster, endpointsB)
		waitBackend(ctx, t, cc, addrB)
		callN(ctx, t, cc, addrB, 3)
		st := e.waitSteady(ctx, t, node, map[string]string{
			lds: setVersion(listener),
			rds: setVersion(route),
			cds: setVersion(cluster),
			eds: setVersion(endpointsB),
		})
		checkSameStream(t, st, streamID)
	}) {
		return
	}

	bad := mustRes(t, xdstest.NackListener(target, route.Name))
	badVersion := setVersion(bad)
	// barrierEDS carries the same endpoint (backend B) with a different
	// locality sub-zone: a new version grpc-go accepts without changing
	// where RPCs go.
	barrierEDS := func() *resource.Resource {
		cla := xdstest.Endpoints(cluster.Name, addrB)
		cla.Endpoints[0].Locality.SubZone = "barrier"
		return mustRes(t, cla)
	}()
	if !t.Run("S4_nack_recorded_not_resent", func(t *testing.T) {
		e.publish(t, node, bad, route, cluster, endpointsB)
		st, l := e.waitType(ctx, t, node, lds, "grpc-go's NACK of the listener", func(ts server.TypeStatus) bool {
			return strings.Contains(ts.NackMessage, xdstest.NackListenerReason)
		})
		t.Logf("NACK recorded: %s", fmtType(l))
		checkSameStream(t, st, streamID)
		if want := fmt.Sprintf("resource %q", target); !strings.Contains(l.NackMessage, want) {
			t.Errorf("LDS NackMessage = %q, want it to name %s", l.NackMessage, want)
		}
		if l.NackedVersion != badVersion {
			t.Errorf("LDS NackedVersion = %q, want the rejected listener's version %q", l.NackedVersion, badVersion)
		}
		if l.SentVersion != badVersion {
			t.Errorf("LDS SentVersion = %q, want the NACKed version %q", l.SentVersion, badVersion)
		}
		if want := setVersion(listener); l.AckedVersion != want {
			t.Errorf("LDS AckedVersion = %q, want the last good version %q", l.AckedVersion, want)
		}
		nackNonce := l.SentNonce
		before := e.srv.Responses()

		// A publish for another node group: no stream of this node
		// watches it.
		e.publish(t, "another-node", mustRes(t, xdstest.Listener("other."+target, "other-route")))
		// Then one for this group that changes the endpoints grpc-go
		// watches (the barrier: its ACK proves the server has handled
		// this snapshot) and adds a listener grpc-go does not subscribe
		// to, so the listener type is marked changed but owes nothing.
		unrelated := mustRes(t, xdstest.Listener("unrelated."+target, route.Name))
		e.publish(t, node, bad, unrelated, route, cluster, barrierEDS)
		e.waitType(ctx, t, node, eds, "ACK of the barrier endpoints", acked(setVersion(barrierEDS)))

		st = e.mustStream(t, node)
		checkSameStream(t, st, streamID)
		l = typeStatus(st, lds)
		if l.SentNonce != nackNonce || l.SentVersion != badVersion {
			t.Errorf("LDS after later publishes: sent version %q nonce %q, want NACKed version %q still with nonce %q (the NACKed listener was resent)",
				l.SentVersion, l.SentNonce, badVersion, nackNonce)
		}
		if got := e.srv.Responses() - before; got != 1 {
			t.Errorf("server sent %d responses across the two publishes, want 1 (the barrier endpoints only); stream: %s", got, fmtStream(st))
		}
		// grpc-go keeps the last good listener: RPCs still reach B.
		callN(ctx, t, cc, addrB, 5)
	}) {
		return
	}

	t.Run("fixed_listener_acked", func(t *testing.T) {
		// The fix points at a new route and cluster leading to backend
		// A, so RPCs moving to A prove grpc-go uses it.
		route2 := mustRes(t, xdstest.RouteConfig("route2-"+target, target, "cluster2-"+target))
		cluster2 := mustRes(t, xdstest.Cluster("cluster2-"+target, ""))
		endpoints2 := mustRes(t, xdstest.Endpoints("cluster2-"+target, addrA))
		fixed := mustRes(t, xdstest.Listener(target, route2.Name))
		e.publish(t, node, fixed, route, route2, cluster, cluster2, barrierEDS, endpoints2)

		st, l := e.waitType(ctx, t, node, lds, "ACK of the fixed listener", acked(setVersion(fixed)))
		checkSameStream(t, st, streamID)
		if l.NackedVersion != badVersion {
			t.Errorf("LDS NackedVersion = %q after the fix, want %q kept as history", l.NackedVersion, badVersion)
		}
		waitBackend(ctx, t, cc, addrA)
		callN(ctx, t, cc, addrA, 3)

		// In the end every type is ACKed at what was last sent.
		st = e.waitAllAcked(ctx, t, node, lds, rds, cds, eds)
		checkSameStream(t, st, streamID)
		t.Logf("final: %s", fmtStream(st))
	})
}

// testNodeGroups serves two grpc-go channels with different node ids from
// two node groups of one cache (PROTOCOL N1): same target, different
// backends, and a publish to one group leaves the other alone.
func testNodeGroups(t *testing.T) {
	addrA, _ := xdstest.StartBackend(t)
	addrB, _ := xdstest.StartBackend(t)
	addrC, _ := xdstest.StartBackend(t)
	e := startXDSD(t)

	const (
		target = "svc.groups.example"
		node1  = "node-1"
		node2  = "node-2"
	)
	res1 := resourcesOf(t, xdstest.DefaultResources(target, addrA))
	res2 := resourcesOf(t, xdstest.DefaultResources(target, addrB))
	e.publish(t, node1, res1...)
	e.publish(t, node2, res2...)

	cc1 := xdstest.Dial(t, "xds:///"+target, xdstest.Bootstrap(e.addr, node1))
	cc2 := xdstest.Dial(t, "xds:///"+target, xdstest.Bootstrap(e.addr, node2))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	callN(ctx, t, cc1, addrA, 3)
	callN(ctx, t, cc2, addrB, 3)
	st1 := e.waitSteady(ctx, t, node1, versionsOf(res1))
	st2 := e.waitSteady(ctx, t, node2, versionsOf(res2))
	if st1.ID == st2.ID {
		t.Fatalf("both nodes on stream %d, want one stream each", st1.ID)
	}
	if v1, v2 := typeStatus(st1, eds).AckedVersion, typeStatus(st2, eds).AckedVersion; v1 == v2 {
		t.Errorf("both nodes ACKed endpoints version %q, want each its group's", v1)
	}

	// Move node-2's group to backend C: node-2 follows, node-1 gets nothing.
	before := e.srv.Responses()
	cla := mustRes(t, xdstest.Endpoints(res2[3].Name, addrC))
	e.publish(t, node2, res2[0], res2[1], res2[2], cla)
	waitBackend(ctx, t, cc2, addrC)
	e.waitType(ctx, t, node2, eds, "node-2's ACK of backend C", acked(setVersion(cla)))
	callN(ctx, t, cc1, addrA, 3)

	after1 := e.mustStream(t, node1)
	checkSameStream(t, after1, st1.ID)
	for _, url := range []string{lds, rds, cds, eds} {
		if b, a := typeStatus(st1, url), typeStatus(after1, url); a.SentNonce != b.SentNonce {
			t.Errorf("node-1 %s: sent nonce %q -> %q after a publish to node-2's group", shortType(url), b.SentNonce, a.SentNonce)
		}
	}
	if got := e.srv.Responses() - before; got != 1 {
		t.Errorf("server sent %d responses for a publish to node-2's group, want 1 (node-2's endpoints)", got)
	}
}

// xdsd is a running xdsd server whose cache groups nodes by id.
type xdsd struct {
	cache *cache.Cache
	srv   *server.Server
	addr  string
}

// startXDSD runs xdsd on loopback with a cache that groups nodes by id; its
// log is printed if the test fails.
func startXDSD(t *testing.T) *xdsd {
	t.Helper()
	logs := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("xdsd log (last %d lines):\n%s", maxLogLines, lastLines(logs.String(), maxLogLines))
		}
	})
	c := cache.New(func(n *corev3.Node) string { return n.GetId() })
	env := rawxds.Start(t, c, server.Config{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return &xdsd{cache: c, srv: env.Server, addr: env.Addr}
}

// publish sets the snapshot of group to rs.
func (x *xdsd) publish(t *testing.T, group string, rs ...*resource.Resource) {
	t.Helper()
	snap, err := cache.NewSnapshot(rs...)
	if err != nil {
		t.Fatalf("snapshot for %q: %v", group, err)
	}
	x.cache.SetSnapshot(group, snap)
}

// streams returns the status of the ADS SotW streams of nodeID.
func (x *xdsd) streams(nodeID string) []server.StreamStatus {
	var out []server.StreamStatus
	for _, s := range x.srv.Status() {
		if s.Node.GetId() == nodeID && s.Variant == "ads/sotw" {
			out = append(out, s)
		}
	}
	return out
}

// mustStream returns the one ADS SotW stream of nodeID.
func (x *xdsd) mustStream(t *testing.T, nodeID string) server.StreamStatus {
	t.Helper()
	ss := x.streams(nodeID)
	if len(ss) != 1 {
		t.Fatalf("node %q has %d ADS SotW streams, want 1: %v", nodeID, len(ss), ss)
	}
	return ss[0]
}

// waitStream polls until nodeID has exactly one ADS SotW stream and cond
// holds for it, and returns it; it fails t with what when ctx ends first.
func (x *xdsd) waitStream(ctx context.Context, t *testing.T, nodeID, what string, cond func(server.StreamStatus) bool) server.StreamStatus {
	t.Helper()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ss := x.streams(nodeID)
		if len(ss) == 1 && cond(ss[0]) {
			return ss[0]
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			var last []string
			for _, s := range ss {
				last = append(last, fmt.Sprintf("stream %d: %s", s.ID, fmtStream(s)))
			}
			t.Fatalf("node %q: waiting for %s: %v; streams: %v", nodeID, what, ctx.Err(), last)
		}
	}
}

// waitType is waitStream for a condition on one type of the stream.
func (x *xdsd) waitType(ctx context.Context, t *testing.T, nodeID, url, what string, cond func(server.TypeStatus) bool) (server.StreamStatus, server.TypeStatus) {
	t.Helper()
	st := x.waitStream(ctx, t, nodeID, what, func(s server.StreamStatus) bool {
		return cond(typeStatus(s, url))
	})
	return st, typeStatus(st, url)
}

// waitSteady waits until, for each type URL in want, the stream's latest
// response has that version and the client ACKed it.
func (x *xdsd) waitSteady(ctx context.Context, t *testing.T, nodeID string, want map[string]string) server.StreamStatus {
	t.Helper()
	return x.waitStream(ctx, t, nodeID, fmt.Sprintf("ACKs of %v", want), func(s server.StreamStatus) bool {
		for url, v := range want {
			if !acked(v)(typeStatus(s, url)) {
				return false
			}
		}
		return true
	})
}

// waitAllAcked waits until each of urls has been sent and its latest
// response ACKed.
func (x *xdsd) waitAllAcked(ctx context.Context, t *testing.T, nodeID string, urls ...string) server.StreamStatus {
	t.Helper()
	return x.waitStream(ctx, t, nodeID, "every type ACKed", func(s server.StreamStatus) bool {
		for _, url := range urls {
			ts := typeStatus(s, url)
			if ts.SentVersion == "" || ts.AckedVersion != ts.SentVersion || ts.AckedAt.Before(ts.SentAt) {
				return false
			}
		}
		return true
	})
}

// acked matches a type whose latest response has version v and was ACKed.
func acked(v string) func(server.TypeStatus) bool {
	return func(ts server.TypeStatus) bool {
		return ts.SentVersion == v && ts.AckedVersion == v && !ts.AckedAt.Before(ts.SentAt)
	}
}

// typeStatus returns the entry of s for url (zero but for TypeURL if none).
func typeStatus(s server.StreamStatus, url string) server.TypeStatus {
	for _, ts := range s.Types {
		if ts.TypeURL == url {
			return ts
		}
	}
	return server.TypeStatus{TypeURL: url}
}

func checkSameStream(t *testing.T, st server.StreamStatus, id uint64) {
	t.Helper()
	if st.ID != id {
		t.Errorf("grpc-go is on stream %d, want still stream %d (the ADS stream was reopened)", st.ID, id)
	}
}

// waitBackend polls with RPCs until one is answered by want. Failed RPCs
// are retried: the channel may be switching configs.
func waitBackend(ctx context.Context, t *testing.T, cc grpc.ClientConnInterface, want string) {
	t.Helper()
	var (
		id  string
		err error
	)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		id, err = xdstest.CallBackend(ctx, cc)
		if err == nil && id == want {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no RPC answered by %q: last answer %q, error %v", want, id, err)
		}
	}
}

// callN makes n RPCs, each of which must succeed and be answered by want.
func callN(ctx context.Context, t *testing.T, cc grpc.ClientConnInterface, want string, n int) {
	t.Helper()
	for i := range n {
		id, err := xdstest.CallBackend(ctx, cc)
		if err != nil {
			t.Fatalf("RPC %d: %v", i, err)
		}
		if id != want {
			t.Fatalf("RPC %d answered by %q, want %q", i, id, want)
		}
	}
}

func mustRes(t *testing.T, m proto.Message) *resource.Resource {
	t.Helper()
	r, err := resource.New(m)
	if err != nil {
		t.Fatalf("resource.New: %v", err)
	}
	return r
}

// resourcesOf returns the listener, route, cluster and endpoints of r, in
// that order.
func resourcesOf(t *testing.T, r xdstest.Resources) []*resource.Resource {
	t.Helper()
	return []*resource.Resource{
		mustRes(t, r.Listener), mustRes(t, r.RouteConfig), mustRes(t, r.Cluster), mustRes(t, r.Endpoints),
	}
}

// versionsOf maps the type URL of each resource to the SotW version of a
// response holding just it.
func versionsOf(rs []*resource.Resource) map[string]string {
	out := make(map[string]string, len(rs))
	for _, r := range rs {
		out[r.Type.URL] = setVersion(r)
	}
	return out
}

// setVersion is the SotW version_info xdsd gives a response (or a client's
// holding) made of exactly rs.
func setVersion(rs ...*resource.Resource) string {
	var xor uint64
	for _, r := range rs {
		xor ^= r.Hash()
	}
	return resource.SetVersion(xor)
}

func shortType(url string) string {
	if t := resource.Lookup(url); t != nil {
		return t.Short
	}
	return url
}

func fmtType(ts server.TypeStatus) string {
	return fmt.Sprintf("%s{sent %s/%s acked %s nacked %s %q}",
		shortType(ts.TypeURL), ts.SentVersion, ts.SentNonce, ts.AckedVersion, ts.NackedVersion, ts.NackMessage)
}

func fmtStream(s server.StreamStatus) string {
	parts := make([]string, 0, len(s.Types))
	for _, ts := range s.Types {
		parts = append(parts, fmtType(ts))
	}
	if s.LastError != "" {
		parts = append(parts, "last error: "+s.LastError)
	}
	return strings.Join(parts, " ")
}

// maxLogLines bounds the server log printed on failure (a NACK loop would
// flood it).
const maxLogLines = 40

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lockedBuffer is an io.Writer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
