package server

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// ackedStream is a started stream whose types have sent responses: CDS
// (nonce "5", version "v1", names a,b) and EDS (nonce "6", version "v2",
// names x). only selects a per-type stream of CDS.
func ackedStream(t testing.TB, delta bool, only *resource.Type) *stream {
	c := cache.New(nil)
	srv := New(c, Config{})
	st := srv.newStream(delta, only)
	node, _ := proto.Marshal(&corev3.Node{Id: "n1"})
	st.node = node
	st.watcher = c.WatchEncoded(node, func() {})
	t.Cleanup(st.watcher.Close)
	set := func(rt *resource.Type, nonce, v string, names ...string) {
		ts := st.state(rt)
		ts.active, ts.nonce, ts.lastVersion, ts.waiting = true, nonce, v, true
		ts.setNames(names)
		ts.namesDigest, ts.namesKnown = xdswire.DigestNames(names), true
	}
	set(cdsType, "5", "v1", "a", "b")
	if only == nil {
		set(edsType, "6", "v2", "x")
	}
	return st
}

// plainSotwAck reports whether the handler would see raw as a plain ACK of
// a type's latest response on st: it decodes, its nonce is the latest, it
// has no error_detail, its version is the one sent, its type is the type's
// and its names are the type's.
func plainSotwAck(t testing.TB, st *stream, raw []byte) bool {
	var req discovery.DiscoveryRequest
	if lenientDecode(t, raw, &req) != nil {
		return false
	}
	if req.ErrorDetail != nil || len(req.ProtoReflect().GetUnknown()) > 0 {
		return false
	}
	for _, ts := range st.types.list {
		if req.ResponseNonce != ts.nonce || req.VersionInfo != ts.lastVersion {
			continue
		}
		if req.TypeUrl != ts.t.URL && !(req.TypeUrl == "" && ts.t == st.only) {
			continue
		}
		return xdswire.DigestNames(req.ResourceNames) == ts.namesDigest
	}
	return false
}

// FuzzSotwInlineIsPlainAck: what the reader takes inline as a SotW ACK
// is what the handler would see as a plain ACK of a type's latest
// response, on ADS and on a per-type stream.
func FuzzSotwInlineIsPlainAck(f *testing.F) {
	m := func(r *discovery.DiscoveryRequest) []byte { b, _ := proto.Marshal(r); return b }
	f.Add(m(&discovery.DiscoveryRequest{VersionInfo: "v1", ResourceNames: []string{"a", "b"}, TypeUrl: cdsType.URL, ResponseNonce: "5"}), false)
	f.Add(m(&discovery.DiscoveryRequest{VersionInfo: "v1", ResourceNames: []string{"a", "b"}, ResponseNonce: "5"}), true)
	f.Add(m(&discovery.DiscoveryRequest{VersionInfo: "v2", Node: &corev3.Node{Id: "n1"}, ResourceNames: []string{"x"}, TypeUrl: edsType.URL, ResponseNonce: "6"}), false)
	// The node twice, the first's id not UTF-8: protobuf merges them.
	twice := append([]byte{0x0a, 0x02, 'v', '2', 0x12, 0x04, 0x0a, 0x02, 0xff, 0xfe}, m(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "n1"}})...)
	f.Add(append(twice, m(&discovery.DiscoveryRequest{ResourceNames: []string{"x"}, TypeUrl: edsType.URL, ResponseNonce: "6"})...), false)
	f.Fuzz(func(t *testing.T, raw []byte, perType bool) {
		var only *resource.Type
		if perType {
			only = cdsType
		}
		st := ackedStream(t, false, only)
		want := plainSotwAck(t, st, raw)
		if got := st.ackSotwInline(raw); got && !want {
			t.Fatalf("%x taken inline, not a plain ACK", raw)
		}
	})
}

// FuzzNamesDigest: two requests whose names digests are equal decode to
// the same list of names.
func FuzzNamesDigest(f *testing.F) {
	m := func(r *discovery.DiscoveryRequest) []byte { b, _ := proto.Marshal(r); return b }
	f.Add(m(&discovery.DiscoveryRequest{VersionInfo: "v1", ResourceNames: []string{"a", "b"}, TypeUrl: "t"}),
		append(m(&discovery.DiscoveryRequest{ResourceNames: []string{"a"}, TypeUrl: "t"}), m(&discovery.DiscoveryRequest{ResourceNames: []string{"b"}})...))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ra, rb := &xdswire.SotwRequest{Raw: a}, &xdswire.SotwRequest{Raw: b}
		da, na, ea := ra.Decode()
		db, nb, eb := rb.Decode()
		if ea != nil || eb != nil || da != db {
			return
		}
		la, e1 := na()
		lb, e2 := nb()
		if e1 != nil || e2 != nil {
			return
		}
		if !slices.Equal(la, lb) {
			t.Fatalf("equal digests, names %q and %q", la, lb)
		}
		var pa discovery.DiscoveryRequest
		if lenientDecode(t, a, &pa) == nil && !slices.Equal(pa.ResourceNames, la) {
			t.Fatalf("names %q, protobuf decodes %q", la, pa.ResourceNames)
		}
	})
}
