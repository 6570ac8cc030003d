package server

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// The fuzz targets drive one stream's state machine directly, as run would:
// each decoded operation (a request, a snapshot change, a snapshot kick, a
// warm-gate timeout, an ACK or NACK of the latest response) is followed by
// push. Every response is checked as it is sent:
//
//   - its nonce is non-empty and unique so far;
//   - its type is one the stream serves and the client has asked for, and at
//     most one response per type is in flight (un-ACKed);
//   - it names no resource twice (S11), every body has the response's type;
//   - what it sends is current: a SotW response of a type that is not full
//     state, and every delta resource, carry the snapshot's version; a delta
//     "does not exist" entry names a key that does not resolve (D5); delta
//     removals and resources are disjoint.
//
// At the end the client ACKs whatever is in flight until the stream is quiet:
// an ACK never makes the server send the same thing again (no ACK spin).
// Then what the client holds (every ACKed response applied) must be what
// its subscription covers in the snapshot: each subscribed resource at the
// snapshot's version and, for full-state SotW types and delta, nothing in
// scope that is gone. Types the client NACKed (whose rejected versions are
// rightly not resent), SotW types resumed from a claimed version, and VHDS
// (aliases) are left out of that check.

const fuzzWrapperURL = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// fuzzTypeURLs are the type URLs a fuzzed request may carry: every served
// type, and some that are not.
var fuzzTypeURLs = []string{
	resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType,
	resource.ScopedRouteType, resource.VirtualHostType, resource.SecretType, resource.RuntimeType,
	resource.ExtensionType, "", "type.googleapis.com/xdsd.Unknown", "type.googleapis.com/envoy.api.v2.Listener",
}

// fuzzNames is the alphabet of subscription names: resource names, VHDS
// aliases, names that never exist, and the wildcard.
var fuzzNames = []string{
	"c0", "c1", "e0", "l0", "l1", "r0", "r0/vh0", "r0/a.com", "r0/b.com", "r0/vh1",
	"r0/c.com", "r0/d.com", "s0", "rt0", "x0", "sr0", "missing", "", "*",
}

// fuzzPool holds two variants of every resource a fuzzed snapshot may
// contain; bodies maps each variant's Body back to it.
type fuzzPool struct {
	entries [][2]*resource.Resource
	bodies  map[*anypb.Any]*resource.Resource
}

var fuzzResources = sync.OnceValue(func() *fuzzPool {
	eds := func(name, service string) *resource.Resource {
		return resource.MustNew(&clusterv3.Cluster{
			Name:                 name,
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
				ServiceName: service,
				EdsConfig:   &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
			},
		})
	}
	addr := func(port uint32) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
	}
	cla := func(name string, port uint32, opts ...resource.Option) *resource.Resource {
		return resource.MustNew(&endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr(port)}},
			}}}},
		}, opts...)
	}
	listener := func(name string, port uint32, opts ...resource.Option) *resource.Resource {
		return resource.MustNew(&listenerv3.Listener{Name: name, Address: addr(port)}, opts...)
	}
	route := func(cluster string) *resource.Resource {
		return resource.MustNew(&routev3.RouteConfiguration{Name: "r0", VirtualHosts: []*routev3.VirtualHost{{
			Name: "vh", Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
			}},
		}}})
	}
	vhost := func(name string, domains ...string) *resource.Resource {
		return resource.MustNew(&routev3.VirtualHost{Name: name, Domains: domains})
	}
	secret := func(v string) *resource.Resource {
		return resource.MustNew(&tlsv3.Secret{Name: "s0", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
			Secret: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: v}}}}})
	}
	runtime := func(v string) *resource.Resource {
		layer, _ := structpb.NewStruct(map[string]any{"k": v})
		return resource.MustNew(&runtimev3.Runtime{Name: "rt0", Layer: layer})
	}
	extension := func(v string) *resource.Resource {
		a, _ := anypb.New(structpb.NewStringValue(v))
		return resource.MustNew(&corev3.TypedExtensionConfig{Name: "x0", TypedConfig: a})
	}
	scoped := func(rc string) *resource.Resource {
		return resource.MustNew(&routev3.ScopedRouteConfiguration{Name: "sr0", RouteConfigurationName: rc,
			Key: &routev3.ScopedRouteConfiguration_Key{Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{
				Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: "k"}}}}})
	}
	ttl := resource.WithTTL(time.Minute)
	p := &fuzzPool{entries: [][2]*resource.Resource{
		{eds("c0", ""), eds("c0", "e0")},
		{eds("c1", ""), resource.MustNew(&clusterv3.Cluster{Name: "c1",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}})},
		{cla("c0", 1), cla("c0", 2)},
		{cla("c1", 1), cla("c1", 2, ttl)},
		{cla("e0", 1), cla("e0", 2)},
		{listener("l0", 80), listener("l0", 81)},
		{listener("l1", 80), listener("l1", 80, ttl)},
		{route("c0"), route("c1")},
		{vhost("r0/vh0", "a.com", "b.com"), vhost("r0/vh0", "a.com")},
		{vhost("r0/vh1", "c.com"), vhost("r0/vh1", "c.com", "d.com")},
		{secret("a"), secret("b")},
		{runtime("a"), runtime("b")},
		{extension("a"), extension("b")},
		{scoped("r0"), scoped("r1")},
	}, bodies: map[*anypb.Any]*resource.Resource{}}
	for _, e := range p.entries {
		p.bodies[e[0].Body], p.bodies[e[1].Body] = e[0], e[1]
	}
	return p
})

// snapshot builds the snapshot selected by two bit masks: which pool
// entries are present and which variant each takes.
func (p *fuzzPool) snapshot(present, variant uint16) *cache.Snapshot {
	var rs []*resource.Resource
	for i, e := range p.entries {
		if present&(1<<i) != 0 {
			rs = append(rs, e[variant>>i&1])
		}
	}
	return cache.MustSnapshot(rs...) // the pool has no clashing names or aliases
}

// fuzzVariants are the streams a fuzz input may open: ADS (nil) and every
// per-type service. Delta also has VHDS.
var fuzzVariants = []*resource.Type{
	nil, ldsType, rdsType, srdsType, cdsType, edsType, sdsType, rtdsType, ecdsType, vhdsType,
}

// fuzzInput hands out the bytes of a fuzz input; past the end it yields
// zeros.
type fuzzInput []byte

func (in *fuzzInput) byte() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

func (in *fuzzInput) pick(n int) int { return int(in.byte()) % n }

func (in *fuzzInput) uint16() uint16 { return uint16(in.byte()) | uint16(in.byte())<<8 }

func (in *fuzzInput) bytes(n int) []byte {
	n = min(n, len(*in))
	b := (*in)[:n]
	*in = (*in)[n:]
	return b
}

// Operations, by the first byte of each.
const (
	fuzzOpRequest = iota
	fuzzOpRawRequest
	fuzzOpPublish
	fuzzOpKick
	fuzzOpWarmTimeout
	fuzzOpAck
	fuzzOpNack
	fuzzOpAckAll
	fuzzOpCount
)

// fuzzClient drives one stream and checks every response it sends.
type fuzzClient struct {
	t     *testing.T
	pool  *fuzzPool
	c     *cache.Cache
	st    *stream
	delta bool
	in    fuzzInput

	nonces      map[string]bool   // every nonce sent
	nonceList   []string          // in order
	requested   map[string]bool   // type URLs the client has asked for
	inFlight    map[string]string // type URL -> nonce not yet answered
	superseded  map[string]bool   // type URL -> a request asked for more since inFlight's response
	lastNonce   map[string]string // type URL -> latest nonce sent
	lastVersion map[string]string // type URL -> latest version_info sent
	lastNames   map[string][]string
	versions    []string // every version seen, for resume claims
	sends       int
	closed      bool // handle returned an error: the stream is over
	models      map[string]*fuzzModel
	canonicals  map[*canonical]bool // every shared list the stream has used
}

// fuzzModel is the client's view of one type: its subscription, as the
// protocol defines it, and what it holds.
type fuzzModel struct {
	active    bool
	everNamed bool
	wildcard  bool
	names     map[string]bool
	held      map[string]string // name -> version applied
	pending   func()            // applies the response in flight
	nacked    bool              // some response was NACKed
	resumed   bool              // SotW: the first request claimed a version
}

func (fc *fuzzClient) model(url string) *fuzzModel {
	m := fc.models[url]
	if m == nil {
		m = &fuzzModel{names: map[string]bool{}, held: map[string]string{}}
		fc.models[url] = m
	}
	return m
}

// track updates the model for a request the server accepted for type t.
// answered reports whether it answers the response in flight.
func (fc *fuzzClient) track(t *resource.Type, req proto.Message, answered bool) {
	m := fc.model(t.URL)
	first := !m.active
	m.active = true
	switch r := req.(type) {
	case *discovery.DiscoveryRequest:
		if answered {
			fc.answer(m, r.GetErrorDetail() != nil)
		}
		// S7, S8: the request replaces the subscription, a stale one too
		// (it only answers no response).
		m.wildcard, m.names = false, map[string]bool{}
		for _, n := range r.GetResourceNames() {
			if n == "*" {
				m.wildcard = true
			} else {
				m.names[n] = true
			}
		}
		if len(r.GetResourceNames()) > 0 {
			m.everNamed = true
		} else if !m.everNamed && t.Wildcard {
			m.wildcard = true
		}
		if first && r.GetVersionInfo() != "" && r.GetResponseNonce() == "" {
			m.resumed = true
		}
	case *discovery.DeltaDiscoveryRequest:
		if answered {
			fc.answer(m, r.GetErrorDetail() != nil)
		}
		// D3: subscribe and unsubscribe change the subscription.
		if first && len(r.GetResourceNamesSubscribe()) == 0 && t.Wildcard && !m.everNamed {
			m.wildcard = true
		}
		for _, n := range r.GetResourceNamesSubscribe() {
			m.everNamed = true
			if n == "*" {
				m.wildcard = true
			} else {
				m.names[n] = true
			}
		}
		for _, n := range r.GetResourceNamesUnsubscribe() {
			if n == "*" {
				m.wildcard = false
			} else {
				delete(m.names, n)
			}
		}
		// The client drops what it no longer subscribes to (what the
		// wildcard still covers it keeps).
		for n := range m.held {
			if !m.wildcard && !m.names[n] {
				delete(m.held, n)
			}
		}
		if first {
			for n, v := range r.GetInitialResourceVersions() {
				if m.wildcard || m.names[n] {
					m.held[n] = v // D6: what the client says it has
				}
			}
		}
	}
}

// answer applies (ACK) or drops (NACK) the response in flight.
func (fc *fuzzClient) answer(m *fuzzModel, nack bool) {
	if nack {
		m.nacked = true
	} else if m.pending != nil {
		m.pending()
	}
	m.pending = nil
}

// checkConverged checks, once the stream is quiet, that the client holds
// what its subscriptions cover.
func (fc *fuzzClient) checkConverged() {
	t := fc.t
	snap := fc.st.snap
	if snap == nil {
		return
	}
	for url, m := range fc.models {
		typ := resource.Lookup(url)
		if m.nacked || m.resumed || typ == vhdsType {
			continue
		}
		want := map[string]string{}
		if m.wildcard {
			snap.Each(typ, func(r *resource.Resource) { want[r.Name] = r.Version })
		}
		for n := range m.names {
			if r := snap.Get(typ, n); r != nil {
				want[n] = r.Version
			}
		}
		for n, v := range want {
			if m.held[n] != v {
				t.Fatalf("%s: after every response is ACKed the client holds %s at %q, want %q (subscription wildcard=%v names=%v)",
					typ, n, m.held[n], v, m.wildcard, slices.Sorted(maps.Keys(m.names)))
			}
		}
		if !fc.delta && !typ.FullState {
			continue // a SotW client keeps its copies of what it no longer gets
		}
		for n, v := range m.held {
			if _, ok := want[n]; !ok && (m.wildcard || m.names[n]) {
				t.Fatalf("%s: after every response is ACKed the client still holds %s at %q, which is gone (subscription wildcard=%v names=%v)",
					typ, n, v, m.wildcard, slices.Sorted(maps.Keys(m.names)))
			}
		}
	}
}

func newFuzzClient(t *testing.T, data []byte, delta bool) *fuzzClient {
	fc := &fuzzClient{
		t: t, pool: fuzzResources(), c: cache.New(nil), delta: delta, in: fuzzInput(data),
		nonces: map[string]bool{}, requested: map[string]bool{}, inFlight: map[string]string{}, superseded: map[string]bool{},
		lastNonce: map[string]string{}, lastVersion: map[string]string{}, lastNames: map[string][]string{},
		models: map[string]*fuzzModel{},
	}
	flags := fc.in.byte()
	if flags&1 != 0 {
		fc.c.SetSnapshot("", fc.pool.snapshot(fc.in.uint16(), fc.in.uint16()))
	}
	variants := fuzzVariants
	if !delta {
		variants = variants[:len(variants)-1] // VHDS is incremental only
	}
	only := variants[int(flags>>1)%len(variants)]
	srv := New(fc.c, Config{})
	fc.st = srv.newStream(delta, only)
	fc.st.sendSotw = fc.checkSotw
	fc.st.sendDeltaResp = fc.checkDelta
	fc.st.waker.fn = func() {} // the model decides when the stream takes its turns
	if flags&0x80 != 0 {
		fc.st.sendWire = fc.checkWire // the production path: pre-encoded responses
	}
	return fc
}

// typeOf mirrors stream.typeOf: the type a request URL resolves to, nil
// if it is ignored or refused.
func (fc *fuzzClient) typeOf(url string) *resource.Type {
	if only := fc.st.only; only != nil {
		if url == "" || url == only.URL {
			return only
		}
		return nil
	}
	return resource.Lookup(url)
}

// node returns the node of a request, or nil.
func (fc *fuzzClient) node(flags byte) *corev3.Node {
	if flags&2 == 0 {
		return nil
	}
	n := &corev3.Node{Id: "fuzz"}
	if flags&4 != 0 {
		n.ClientFeatures = []string{clientFeatureResourceInSotw, "xds.config.supports-resource-ttl"}
	}
	return n
}

func (fc *fuzzClient) names(max int) []string {
	n := fc.in.pick(max + 1)
	out := make([]string, n)
	for i := range out {
		out[i] = fuzzNames[fc.in.pick(len(fuzzNames))]
	}
	return out
}

func (fc *fuzzClient) nonce(url string) string {
	switch fc.in.pick(6) {
	case 1:
		return fc.lastNonce[url]
	case 2:
		if len(fc.nonceList) > 0 {
			return fc.nonceList[fc.in.pick(len(fc.nonceList))]
		}
	case 3:
		return "garbage"
	case 4:
		return "18446744073709551615"
	case 5:
		return fc.lastNonce[fuzzTypeURLs[fc.in.pick(len(fuzzTypeURLs))]]
	}
	return ""
}

func (fc *fuzzClient) version(url string) string {
	switch fc.in.pick(4) {
	case 1:
		return fc.lastVersion[url]
	case 2:
		if len(fc.versions) > 0 {
			return fc.versions[fc.in.pick(len(fc.versions))]
		}
	case 3:
		return "0000000000000000"
	}
	return ""
}

func fuzzErrorDetail(flags byte) *rpcstatus.Status {
	if flags&1 == 0 {
		return nil
	}
	return &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: "rejected by fuzz"}
}

// sotwRequest decodes a structured SotW request.
func (fc *fuzzClient) sotwRequest() *discovery.DiscoveryRequest {
	url := fuzzTypeURLs[fc.in.pick(len(fuzzTypeURLs))]
	r := &discovery.DiscoveryRequest{TypeUrl: url, ResourceNames: fc.names(5)}
	r.VersionInfo = fc.version(url)
	r.ResponseNonce = fc.nonce(url)
	flags := fc.in.byte()
	r.ErrorDetail = fuzzErrorDetail(flags)
	r.Node = fc.node(flags)
	return r
}

// deltaRequest decodes a structured incremental request.
func (fc *fuzzClient) deltaRequest() *discovery.DeltaDiscoveryRequest {
	url := fuzzTypeURLs[fc.in.pick(len(fuzzTypeURLs))]
	r := &discovery.DeltaDiscoveryRequest{TypeUrl: url, ResourceNamesSubscribe: fc.names(4), ResourceNamesUnsubscribe: fc.names(2)}
	r.ResponseNonce = fc.nonce(url)
	flags := fc.in.byte()
	r.ErrorDetail = fuzzErrorDetail(flags)
	r.Node = fc.node(flags)
	if n := fc.in.pick(4); n > 0 {
		r.InitialResourceVersions = map[string]string{}
		for range n {
			name := fuzzNames[fc.in.pick(len(fuzzNames))]
			e := fc.pool.entries[fc.in.pick(len(fc.pool.entries))]
			switch fc.in.pick(3) {
			case 0:
				r.InitialResourceVersions[name] = e[0].Version
			case 1:
				r.InitialResourceVersions[name] = e[1].Version
			default:
				r.InitialResourceVersions[name] = "bogus"
			}
		}
	}
	return r
}

// handle applies one request as run does; an error ends the stream, and
// must be InvalidArgument.
func (fc *fuzzClient) handle(req proto.Message) {
	var err error
	var url, nonce string
	var names []string
	switch r := req.(type) {
	case *discovery.DiscoveryRequest:
		url, nonce, names = r.GetTypeUrl(), r.GetResponseNonce(), r.GetResourceNames()
		err = fc.st.handleSotw(r)
	case *discovery.DeltaDiscoveryRequest:
		url, nonce = r.GetTypeUrl(), r.GetResponseNonce()
		err = fc.st.handleDelta(r)
	}
	if err != nil {
		if status.Code(err) != codes.InvalidArgument || fc.st.only == nil {
			fc.t.Fatalf("handle(%v) = %v, want nil or InvalidArgument on a per-type stream", req, err)
		}
		fc.closed = true
		return
	}
	t := fc.typeOf(url)
	if t == nil {
		return
	}
	fc.requested[t.URL] = true
	answered := nonce != "" && nonce == fc.inFlight[t.URL]
	if answered {
		delete(fc.inFlight, t.URL)
		delete(fc.superseded, t.URL)
	}
	m := fc.model(t.URL)
	wasWildcard, had := m.wildcard, maps.Clone(m.names)
	fc.track(t, req, answered)
	if !fc.delta {
		fc.lastNames[t.URL] = names
	}
	// S7, D2: a request that asks for more than the response in flight,
	// and is not its reply, may be answered before that reply.
	if fc.inFlight[t.URL] == "" {
		return
	}
	switch r := req.(type) {
	case *discovery.DiscoveryRequest:
		grew := m.wildcard && !wasWildcard
		for n := range m.names {
			grew = grew || !had[n]
		}
		if grew && nonce == "" {
			fc.superseded[t.URL] = true
		}
	case *discovery.DeltaDiscoveryRequest:
		if len(r.GetResourceNamesSubscribe()) > 0 {
			fc.superseded[t.URL] = true
		}
	}
}

// pend records apply as what the client does with the response just
// sent, once it has done what it does with those before it (a response
// sent while another was in flight, which a request superseded).
func (m *fuzzModel) pend(apply func()) {
	if prev := m.pending; prev != nil {
		m.pending = func() { prev(); apply() }
		return
	}
	m.pending = apply
}

// kick takes a pending snapshot from the watcher, as a turn does.
func (fc *fuzzClient) kick() {
	if fc.st.watcher != nil {
		fc.st.takeSnapshot()
	}
}

// reply ACKs (or NACKs) the latest response of the type at index i of the
// types in flight, in order.
func (fc *fuzzClient) reply(i int, nack bool) {
	urls := make([]string, 0, len(fc.inFlight))
	for u := range fc.inFlight {
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return
	}
	slices.Sort(urls)
	url := urls[i%len(urls)]
	var detail *rpcstatus.Status
	if nack {
		detail = &rpcstatus.Status{Code: int32(codes.InvalidArgument), Message: "nack"}
	}
	if fc.delta {
		fc.handle(&discovery.DeltaDiscoveryRequest{TypeUrl: url, ResponseNonce: fc.inFlight[url], ErrorDetail: detail})
		return
	}
	fc.handle(&discovery.DiscoveryRequest{TypeUrl: url, ResponseNonce: fc.inFlight[url], VersionInfo: fc.lastVersion[url],
		ResourceNames: fc.lastNames[url], ErrorDetail: detail})
}

// step decodes and applies one operation, then pushes.
func (fc *fuzzClient) step() {
	switch fc.in.pick(fuzzOpCount) {
	case fuzzOpRequest:
		if fc.delta {
			fc.handle(fc.deltaRequest())
		} else {
			fc.handle(fc.sotwRequest())
		}
	case fuzzOpRawRequest:
		b := fc.in.bytes(int(fc.in.byte()))
		var m proto.Message = &discovery.DiscoveryRequest{}
		if fc.delta {
			m = &discovery.DeltaDiscoveryRequest{}
		}
		if proto.Unmarshal(b, m) != nil {
			return
		}
		fc.handle(m)
	case fuzzOpPublish:
		fc.c.SetSnapshot("", fc.pool.snapshot(fc.in.uint16(), fc.in.uint16()))
		return // run pushes only after the kick is taken
	case fuzzOpKick:
		fc.kick()
	case fuzzOpWarmTimeout:
		if fc.st.warm.deadline.IsZero() {
			return
		}
		fc.st.warm.clear()
	case fuzzOpAck:
		fc.reply(fc.in.pick(16), false)
	case fuzzOpNack:
		fc.reply(fc.in.pick(16), true)
	case fuzzOpAckAll:
		for len(fc.inFlight) > 0 && !fc.closed {
			fc.reply(0, false)
		}
	}
	if fc.closed {
		return
	}
	if err := fc.st.push(); err != nil {
		fc.t.Fatalf("push: %v", err)
	}
}

// quiesce lets every timer fire and ACKs everything until the stream has
// nothing more to send. Each round sends at most one response per type,
// and every send settles what it sent, so a handful of rounds suffice.
func (fc *fuzzClient) quiesce() {
	for round := 0; round < 4*len(fuzzTypeURLs); round++ {
		before := fc.sends
		fc.kick()
		fc.st.warm.clear()
		for len(fc.inFlight) > 0 && !fc.closed {
			fc.reply(0, false)
		}
		if fc.closed {
			return
		}
		if err := fc.st.push(); err != nil {
			fc.t.Fatalf("push: %v", err)
		}
		if fc.sends == before && len(fc.inFlight) == 0 {
			fc.checkConverged()
			return
		}
	}
	fc.t.Fatalf("the stream keeps sending after every response is ACKed (%d responses)", fc.sends)
}

// checkHeader checks what every response must satisfy and records it.
func (fc *fuzzClient) checkHeader(url, nonce, version string) *resource.Type {
	t := fc.t
	t.Helper()
	fc.sends++
	if nonce == "" || fc.nonces[nonce] {
		t.Fatalf("response %d of %s has nonce %q, already used or empty", fc.sends, url, nonce)
	}
	fc.nonces[nonce] = true
	fc.nonceList = append(fc.nonceList, nonce)
	typ := resource.Lookup(url)
	if typ == nil || (fc.st.only != nil && typ != fc.st.only) {
		t.Fatalf("response of type %q on a %v stream", url, fc.st.only)
	}
	if !fc.requested[url] {
		t.Fatalf("response of type %s, which the client never asked for", url)
	}
	if prev := fc.inFlight[url]; prev != "" && !fc.superseded[url] {
		t.Fatalf("response %s of %s sent while %s is not yet ACKed and no request superseded it", nonce, url, prev)
	}
	delete(fc.superseded, url)
	fc.inFlight[url] = nonce
	fc.lastNonce[url] = nonce
	fc.lastVersion[url] = version
	fc.versions = append(fc.versions, version)
	return typ
}

// checkWire checks that a response sent on the wire path encodes the
// message it stands for, and checks that message.
func (fc *fuzzClient) checkWire(m any) error {
	w := m.(*xdswire.Response)
	bs, err := Codec{}.Marshal(w)
	if err != nil {
		fc.t.Fatalf("encoding a response: %v", err)
	}
	msg := w.Message()
	got := msg.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(bs.Materialize(), got); err != nil {
		fc.t.Fatalf("decoding a response: %v", err)
	}
	if !proto.Equal(got, msg) { // the fast check; the diff only to report
		fc.t.Fatalf("the wire encoding decodes otherwise (-message +decoded):\n%s", cmp.Diff(msg, got, protocmp.Transform()))
	}
	if resp, ok := msg.(*discovery.DeltaDiscoveryResponse); ok {
		return fc.checkDelta(resp)
	}
	return fc.checkSotw(msg.(*discovery.DiscoveryResponse))
}

func (fc *fuzzClient) checkSotw(resp *discovery.DiscoveryResponse) error {
	t := fc.t
	typ := fc.checkHeader(resp.GetTypeUrl(), resp.GetNonce(), resp.GetVersionInfo())
	if resp.GetVersionInfo() == "" {
		t.Fatalf("%s response without version_info", typ)
	}
	seen := map[string]bool{}
	got := map[string]string{}
	m := fc.model(typ.URL)
	m.pend(func() {
		if typ.FullState {
			clear(m.held) // S9: the response is the whole state
		}
		for n, v := range got { // a client ignores what it no longer subscribes to
			if m.wildcard || m.names[n] {
				m.held[n] = v
			}
		}
	})
	for _, a := range resp.GetResources() {
		var name, version string
		if a.GetTypeUrl() == fuzzWrapperURL {
			if !fc.st.wrapTTL {
				t.Fatalf("%s response wraps a resource for a client that did not ask for wrappers", typ)
			}
			var w discovery.Resource
			if err := a.UnmarshalTo(&w); err != nil {
				t.Fatal(err)
			}
			if w.GetResource().GetTypeUrl() != typ.URL || w.GetTtl() == nil {
				t.Fatalf("%s response wraps %q (ttl %v)", typ, w.GetResource().GetTypeUrl(), w.GetTtl())
			}
			name, version = w.GetName(), w.GetVersion()
		} else {
			r := fc.pool.bodies[a]
			if a.GetTypeUrl() != typ.URL || r == nil {
				t.Fatalf("%s response carries a body of type %q not from the snapshot", typ, a.GetTypeUrl())
			}
			name, version = r.Name, r.Version
		}
		if seen[name] {
			t.Fatalf("%s response names %q twice (S11): %v", typ, name, fuzzSotwNames(fc.pool, resp))
		}
		seen[name] = true
		got[name] = version
		if !typ.FullState {
			if cur := fc.st.snap.Get(typ, name); cur == nil || cur.Version != version {
				t.Fatalf("%s response sends %s at %s, not the snapshot's %v", typ, name, version, cur)
			}
		}
	}
	return nil
}

func (fc *fuzzClient) checkDelta(resp *discovery.DeltaDiscoveryResponse) error {
	t := fc.t
	typ := fc.checkHeader(resp.GetTypeUrl(), resp.GetNonce(), resp.GetSystemVersionInfo())
	seen := map[string]bool{}
	m := fc.model(typ.URL)
	m.pend(func() {
		for _, dr := range resp.GetResources() {
			if dr.GetResource() == nil {
				delete(m.held, dr.GetName())
			} else {
				m.held[dr.GetName()] = dr.GetVersion()
			}
		}
		for _, n := range resp.GetRemovedResources() {
			delete(m.held, n)
		}
	})
	for _, dr := range resp.GetResources() {
		name := dr.GetName()
		if seen[name] {
			t.Fatalf("%s delta response names %q twice: %v", typ, name, fuzzDeltaNames(resp))
		}
		seen[name] = true
		if dr.GetResource() == nil {
			// Does not exist (D5): the key must not resolve.
			if r, _ := fc.st.snap.Resolve(typ, name); r != nil || dr.GetVersion() != "" {
				t.Fatalf("%s delta response says %q (version %q) does not exist; the snapshot has %v", typ, name, dr.GetVersion(), r)
			}
			continue
		}
		r := fc.pool.bodies[dr.GetResource()]
		if r == nil || r.Type != typ || r.Name != name || r.Version != dr.GetVersion() {
			t.Fatalf("%s delta resource %q@%s carries a body that is not its own", typ, name, dr.GetVersion())
		}
		if cur := fc.st.snap.Get(typ, name); cur != r {
			t.Fatalf("%s delta response sends %s at %s, not the snapshot's %v", typ, name, r.Version, cur)
		}
		for _, a := range dr.GetAliases() {
			if got, alias := fc.st.snap.Resolve(typ, a); got != r || !alias {
				t.Fatalf("%s delta resource %s lists alias %q, which is not one of its aliases", typ, name, a)
			}
		}
		if (r.TTL > 0) != (dr.GetTtl() != nil) {
			t.Fatalf("%s delta resource %s: ttl %v, resource TTL %v", typ, name, dr.GetTtl(), r.TTL)
		}
	}
	removed := map[string]bool{}
	for _, n := range resp.GetRemovedResources() {
		if removed[n] || seen[n] {
			t.Fatalf("%s delta response removes %q twice or also sends it: %v / %v", typ, n, fuzzDeltaNames(resp), resp.GetRemovedResources())
		}
		removed[n] = true
	}
	return nil
}

func fuzzSotwNames(p *fuzzPool, resp *discovery.DiscoveryResponse) []string {
	var out []string
	for _, a := range resp.GetResources() {
		if r := p.bodies[a]; r != nil {
			out = append(out, r.Name)
		} else {
			out = append(out, "<"+a.GetTypeUrl()+">")
		}
	}
	return out
}

func fuzzDeltaNames(resp *discovery.DeltaDiscoveryResponse) []string {
	var out []string
	for _, r := range resp.GetResources() {
		out = append(out, r.GetName())
	}
	return out
}

// fuzzStream runs one fuzz input against a new stream.
func fuzzStream(t *testing.T, data []byte, delta bool) {
	fc := newFuzzClient(t, data, delta)
	srv := fc.st.srv
	defer func() {
		fc.st.close()
		if n := len(srv.Status()); n != 0 {
			t.Fatalf("%d streams left in Status after close", n)
		}
	}()
	for len(fc.in) > 0 && !fc.closed {
		fc.step()
		fc.checkShared()
	}
	if !fc.closed {
		fc.quiesce()
		fc.checkShared()
	}
}

// fuzzSeed writes fuzz inputs in the decoders' format.
type fuzzSeed []byte

func (s fuzzSeed) op(op int, args ...byte) fuzzSeed { return append(append(s, byte(op)), args...) }

// fuzzTypeIndex returns the index of url in fuzzTypeURLs.
func fuzzTypeIndex(url string) byte { return byte(slices.Index(fuzzTypeURLs, url)) }

// fuzzNameIndexes returns a name count and the names' indexes in fuzzNames.
func fuzzNameIndexes(names ...string) []byte {
	out := []byte{byte(len(names))}
	for _, n := range names {
		out = append(out, byte(slices.Index(fuzzNames, n)))
	}
	return out
}

// sotwReq appends a structured SotW request: version and nonce selectors
// as in fuzzClient.version and fuzzClient.nonce, flags as in node and
// errorDetail.
func (s fuzzSeed) sotwReq(url string, version, nonce, flags byte, names ...string) fuzzSeed {
	args := append([]byte{fuzzTypeIndex(url)}, fuzzNameIndexes(names...)...)
	return s.op(fuzzOpRequest, append(args, version, nonce, flags)...)
}

// deltaReq appends a structured delta request without initial versions.
func (s fuzzSeed) deltaReq(url string, nonce, flags byte, sub, unsub []string) fuzzSeed {
	args := append([]byte{fuzzTypeIndex(url)}, fuzzNameIndexes(sub...)...)
	args = append(args, fuzzNameIndexes(unsub...)...)
	return s.op(fuzzOpRequest, append(args, nonce, flags, 0)...)
}

// raw appends a request given as its proto encoding.
func (s fuzzSeed) raw(m proto.Message) fuzzSeed {
	b, err := proto.Marshal(m)
	if err != nil || len(b) > 255 {
		panic("seed request too large")
	}
	return s.op(fuzzOpRawRequest, append([]byte{byte(len(b))}, b...)...)
}

func (s fuzzSeed) publish(present, variant uint16) fuzzSeed {
	return s.op(fuzzOpPublish, byte(present), byte(present>>8), byte(variant), byte(variant>>8))
}

// header starts an input: flags (bit 0: initial snapshot, then the variant
// index) and the initial snapshot's masks.
func fuzzHeader(variant int, present, version uint16) fuzzSeed {
	return fuzzSeed{byte(variant<<1 | 1), byte(present), byte(present >> 8), byte(version), byte(version >> 8)}
}

const (
	fuzzAll      = 0x3fff
	fuzzNodeFlag = 2     // flags: send a node
	fuzzNodeTTL  = 2 | 4 // flags: send a node that accepts TTL wrappers
	fuzzNack     = 1     // flags: error_detail
)

func FuzzSotWRequests(f *testing.F) {
	ads := fuzzHeader(0, fuzzAll, 0)
	f.Add([]byte(ads.sotwReq(resource.ClusterType, 0, 0, fuzzNodeFlag).op(fuzzOpKick).
		sotwReq(resource.EndpointType, 0, 0, 0, "c0", "c1").op(fuzzOpAck, 0).op(fuzzOpAck, 0).
		sotwReq(resource.ListenerType, 0, 0, 0).sotwReq(resource.RouteType, 0, 0, 0, "r0").
		publish(fuzzAll, 0x00ff).op(fuzzOpKick).op(fuzzOpAckAll).publish(0x0f0f, 0x3fff).op(fuzzOpKick).op(fuzzOpWarmTimeout).op(fuzzOpAckAll)))
	f.Add([]byte(ads.sotwReq(resource.ClusterType, 0, 0, fuzzNodeTTL, "*", "c0").op(fuzzOpKick).op(fuzzOpNack, 0).
		sotwReq(resource.ClusterType, 1, 2, 0, "c0").sotwReq(resource.EndpointType, 0, 3, 0, "c1", "c1", "missing").
		publish(fuzzAll, fuzzAll).op(fuzzOpKick).op(fuzzOpAckAll).
		sotwReq(resource.EndpointType, 1, 1, fuzzNack, "c1").publish(fuzzAll, 0).op(fuzzOpKick)))
	f.Add([]byte(ads.sotwReq(resource.VirtualHostType, 0, 0, fuzzNodeFlag, "r0/vh1", "r0/b.com", "r0/d.com").op(fuzzOpKick).op(fuzzOpAck, 0).
		sotwReq("type.googleapis.com/xdsd.Unknown", 0, 0, 0, "c0").sotwReq("", 0, 0, 0).
		sotwReq(resource.ScopedRouteType, 0, 0, 0).sotwReq(resource.SecretType, 0, 0, 0, "s0").
		sotwReq(resource.RuntimeType, 0, 0, 0, "rt0").sotwReq(resource.ExtensionType, 0, 0, 0, "x0").op(fuzzOpAckAll)))
	// Per-type streams, including one asked for another type.
	f.Add([]byte(fuzzHeader(4, fuzzAll, 0).sotwReq("", 0, 0, fuzzNodeFlag).op(fuzzOpKick).publish(0x0001, 0).op(fuzzOpKick).op(fuzzOpAck, 0)))
	f.Add([]byte(fuzzHeader(5, fuzzAll, 0).sotwReq(resource.EndpointType, 0, 0, fuzzNodeFlag, "c0").op(fuzzOpKick).sotwReq(resource.ClusterType, 0, 0, 0)))
	// A reconnect claiming a version, and a raw request.
	f.Add([]byte(fuzzHeader(0, fuzzAll, 0).sotwReq(resource.ListenerType, 2, 0, fuzzNodeFlag).op(fuzzOpKick).
		raw(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: "v", ResourceNames: []string{"c0", "*"}})))
	// S11: a VirtualHost subscribed by its name and by an alias on SotW ADS
	// must be sent once.
	f.Add([]byte(ads.sotwReq(resource.VirtualHostType, 0, 0, fuzzNodeFlag, "r0/vh0", "r0/a.com").op(fuzzOpKick)))
	// A wildcard client names a cluster it has while a response is in
	// flight, and the cluster is deleted: once ACKed, the server owes it a
	// response without the cluster (S9).
	f.Add([]byte(fuzzHeader(0, 0x0001, 0).sotwReq(resource.ClusterType, 0, 0, fuzzNodeFlag).op(fuzzOpKick).
		publish(0, 0).sotwReq(resource.ClusterType, 0, 0, 0, "c0").op(fuzzOpKick).op(fuzzOpAck, 0)))
	// No snapshot yet.
	f.Add([]byte(fuzzSeed{0}.sotwReq(resource.ClusterType, 0, 0, fuzzNodeFlag).op(fuzzOpKick).publish(fuzzAll, 0).op(fuzzOpKick)))
	// A first subscription to every endpoint set shares the snapshot's
	// names (adoptNamed): answered and ACKed; held back (behind a CDS
	// change not yet ACKed) while the snapshot changes and loses one; or
	// followed by other names.
	f.Add([]byte(ads.sotwReq(resource.ClusterType, 0, 0, fuzzNodeFlag).op(fuzzOpKick).
		sotwReq(resource.EndpointType, 0, 0, 0, "c0", "c1", "e0").op(fuzzOpAckAll).op(fuzzOpAckAll)))
	f.Add([]byte(ads.sotwReq(resource.ClusterType, 0, 0, fuzzNodeFlag).op(fuzzOpKick).publish(fuzzAll, 1).op(fuzzOpKick).
		sotwReq(resource.EndpointType, 0, 0, 0, "e0", "c0", "c1").publish(0x3fef, 0x0005).op(fuzzOpKick).op(fuzzOpAckAll).op(fuzzOpAckAll)))
	f.Add([]byte(ads.sotwReq(resource.ClusterType, 0, 0, fuzzNodeFlag).op(fuzzOpKick).
		sotwReq(resource.EndpointType, 0, 0, 0, "c0", "c1", "e0").sotwReq(resource.EndpointType, 0, 0, 0, "c1").op(fuzzOpAckAll).op(fuzzOpAckAll)))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzStream(t, data, false) })
}

func FuzzDeltaRequests(f *testing.F) {
	ads := fuzzHeader(0, fuzzAll, 0)
	f.Add([]byte(ads.deltaReq(resource.ClusterType, 0, fuzzNodeFlag, nil, nil).op(fuzzOpKick).
		deltaReq(resource.EndpointType, 0, 0, []string{"c0", "c1", "missing"}, nil).op(fuzzOpAck, 0).op(fuzzOpAck, 0).
		deltaReq(resource.ListenerType, 0, 0, nil, nil).deltaReq(resource.RouteType, 0, 0, []string{"r0"}, nil).
		publish(0x3f0f, 0x00ff).op(fuzzOpKick).op(fuzzOpAckAll).publish(fuzzAll, fuzzAll).op(fuzzOpKick).op(fuzzOpWarmTimeout).op(fuzzOpAckAll)))
	f.Add([]byte(ads.deltaReq(resource.VirtualHostType, 0, fuzzNodeFlag, []string{"r0/vh0", "r0/a.com", "r0/b.com"}, nil).op(fuzzOpKick).
		op(fuzzOpNack, 0).deltaReq(resource.VirtualHostType, 3, fuzzNack, []string{"r0/d.com"}, []string{"r0/vh0", "never"}).
		publish(fuzzAll, fuzzAll).op(fuzzOpKick).op(fuzzOpAckAll)))
	f.Add([]byte(ads.deltaReq(resource.ClusterType, 0, fuzzNodeTTL, []string{"*", "c0"}, nil).op(fuzzOpKick).op(fuzzOpAck, 0).
		deltaReq(resource.ClusterType, 1, 0, nil, []string{"*"}).publish(0x0001, 0).op(fuzzOpKick).op(fuzzOpAckAll).
		deltaReq("", 0, 0, []string{"c0"}, nil).deltaReq("type.googleapis.com/xdsd.Unknown", 4, 0, nil, nil)))
	// Reconnect with initial resource versions.
	f.Add([]byte(ads.op(fuzzOpRequest, fuzzTypeIndex(resource.EndpointType), 2, 0, 1, 0, 0, fuzzNodeFlag, 3, 0, 2, 0, 1, 3, 0, 16, 2, 2).
		op(fuzzOpKick).op(fuzzOpAckAll)))
	f.Add([]byte(fuzzHeader(9, fuzzAll, 0).deltaReq("", 0, fuzzNodeFlag, []string{"r0/vh1", "r0/c.com"}, nil).op(fuzzOpKick).publish(fuzzAll, 0x0200).op(fuzzOpKick)))
	f.Add([]byte(fuzzHeader(3, fuzzAll, 0).deltaReq(resource.ScopedRouteType, 0, fuzzNodeFlag, nil, nil).op(fuzzOpKick).deltaReq(resource.RouteType, 0, 0, nil, nil)))
	f.Add([]byte(ads.raw(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResourceNamesSubscribe: []string{"l0"},
		InitialResourceVersions: map[string]string{"l0": "x"}}).op(fuzzOpKick)))
	// A VirtualHost subscribed by name and by an alias loses that alias:
	// the response updates it and must not also remove it by name.
	f.Add([]byte(fuzzHeader(9, 0x0100, 0).deltaReq("", 0, fuzzNodeFlag, []string{"r0/vh0", "r0/b.com"}, nil).op(fuzzOpKick).
		op(fuzzOpAck, 0).publish(0x0100, 0x0100).op(fuzzOpKick)))
	// A wildcard client subscribes to a cluster it already has and
	// unsubscribes it while a response is in flight; the cluster is then
	// deleted. The client still holds it, so it must be removed (D4).
	f.Add([]byte(fuzzHeader(0, 0x0003, 0).deltaReq(resource.ClusterType, 0, fuzzNodeFlag, nil, nil).op(fuzzOpKick).
		deltaReq(resource.ClusterType, 0, 0, []string{"c0"}, nil).deltaReq(resource.ClusterType, 0, 0, nil, []string{"c0"}).
		publish(0x0002, 0).op(fuzzOpKick).op(fuzzOpAck, 0)))
	f.Add([]byte(fuzzSeed{0}.deltaReq(resource.ClusterType, 0, fuzzNodeFlag, nil, nil).op(fuzzOpKick).publish(fuzzAll, 0).op(fuzzOpKick)))
	// The same shared first subscriptions as FuzzSotWRequests's.
	f.Add([]byte(ads.deltaReq(resource.ClusterType, 0, fuzzNodeFlag, nil, nil).op(fuzzOpKick).
		deltaReq(resource.EndpointType, 0, 0, []string{"c0", "c1", "e0"}, nil).op(fuzzOpAckAll).op(fuzzOpAckAll)))
	f.Add([]byte(ads.deltaReq(resource.ClusterType, 0, fuzzNodeFlag, nil, nil).op(fuzzOpKick).publish(fuzzAll, 1).op(fuzzOpKick).
		deltaReq(resource.EndpointType, 0, 0, []string{"e0", "c0", "c1"}, nil).publish(0x3fef, 0x0005).op(fuzzOpKick).op(fuzzOpAckAll).op(fuzzOpAckAll)))
	f.Add([]byte(ads.deltaReq(resource.ClusterType, 0, fuzzNodeFlag, nil, nil).op(fuzzOpKick).
		deltaReq(resource.EndpointType, 0, 0, []string{"c0", "c1", "e0"}, nil).deltaReq(resource.EndpointType, 0, 0, []string{"x0"}, []string{"c1"}).
		op(fuzzOpAckAll).op(fuzzOpAckAll)))
	// A client unsubscribes a cluster that the response in flight carries,
	// then subscribes to every cluster, and the cluster is deleted: the
	// client took it in with the response, so it must be removed (D4).
	f.Add([]byte(fuzzHeader(0, 0x0003, 0).deltaReq(resource.ClusterType, 0, fuzzNodeFlag, []string{"*", "c1"}, []string{"*"}).
		deltaReq(resource.ClusterType, 0, 0, []string{"c0"}, []string{"c1"}).deltaReq(resource.ClusterType, 0, 0, []string{"*"}, nil).
		publish(0x0001, 0)))
	// The same, with the removal held back behind an endpoint response:
	// what the client may hold outlives that response.
	f.Add([]byte(fuzzHeader(0, 0x0001, 0).deltaReq(resource.ClusterType, 0, fuzzNodeFlag, []string{"c0"}, []string{"*"}).
		deltaReq(resource.ClusterType, 0, 0, []string{"c1"}, []string{"c0"}).publish(0, 0).op(fuzzOpKick).
		deltaReq(resource.EndpointType, 0, 0, []string{"e0"}, nil).deltaReq(resource.ClusterType, 0, 0, []string{"*"}, nil).
		op(fuzzOpAck, 0)))
	// A client unsubscribes a cluster while the response carrying it is
	// in flight, the cluster is deleted, and the client answers the
	// response with a subscription to every cluster: it may have taken
	// the cluster in, so it must be removed (D4).
	f.Add([]byte(fuzzHeader(0, 0x0001, 0).deltaReq(resource.ClusterType, 0, fuzzNodeFlag, []string{"c0"}, nil).
		deltaReq(resource.ClusterType, 0, 0, nil, []string{"c0"}).publish(0, 0).op(fuzzOpKick).
		deltaReq(resource.ClusterType, 1, 0, []string{"*"}, nil)))
	// Before any snapshot, a client says it has a cluster, gives up the
	// wildcard (and so the cluster) and takes it again: the cluster must
	// be sent when the snapshot comes.
	f.Add([]byte(fuzzSeed{0}.raw(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, Node: &corev3.Node{Id: "fuzz"},
		ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: map[string]string{"c0": fuzzResources().entries[0][0].Version}}).
		deltaReq(resource.ClusterType, 0, 0, nil, []string{"*"}).deltaReq(resource.ClusterType, 0, 0, []string{"*"}, nil).
		publish(0x0001, 0)))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzStream(t, data, true) })
}
