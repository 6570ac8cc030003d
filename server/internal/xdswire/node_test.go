package xdswire

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"slices"
	"testing"
	"unique"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// repeatNode is a node as an Envoy encodes it: its own fields around the
// run of the extensions it was built with (n of them).
func repeatNode(id string, n int) []byte {
	return repeatNodeFeatures(id, n, "f1", "f2")
}

// repeatNodeFeatures is repeatNode with the client features given, which
// come after the extensions.
func repeatNodeFeatures(id string, n int, features ...string) []byte {
	node := &corev3.Node{Id: id, Cluster: "c", UserAgentName: "envoy", ClientFeatures: features}
	for i := range n {
		node.Extensions = append(node.Extensions, &corev3.Extension{Name: fmt.Sprintf("envoy.ext.%d", i), Category: "envoy.filters"})
	}
	b, err := proto.Marshal(node)
	if err != nil {
		panic(err)
	}
	return b
}

// TestSeenNodeSameBytes checks that a remembered node is recognised, and
// that a change of any byte or of the size, before, inside or after the
// extensions, is not.
func TestSeenNodeSameBytes(t *testing.T) {
	ext := protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), []byte{0x0a, 0x01, 'e'})
	id := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("n"))
	features := protowire.AppendBytes(protowire.AppendTag(nil, 10, protowire.BytesType), []byte("f"))
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	for name, node := range map[string][]byte{
		"envoy":             repeatNode("n1", 50),
		"no extensions":     repeatNode("n1", 0),
		"only extensions":   cat(ext, ext),
		"extensions first":  cat(ext, id),
		"extensions last":   cat(id, ext),
		"two runs":          cat(id, ext, features, ext, ext),
		"an empty node":     {},
		"one extension run": cat(id, ext, features),
	} {
		t.Run(name, func(t *testing.T) {
			var s SeenNode
			if s.Same(node) {
				t.Fatal("a node is recognised before any is remembered")
			}
			s.Remember(node)
			if !s.Same(append([]byte(nil), node...)) {
				t.Fatal("the remembered node is not recognised")
			}
			for i := range node {
				changed := append([]byte(nil), node...)
				changed[i] ^= 0x40
				if s.Same(changed) {
					t.Fatalf("byte %d changed, still recognised", i)
				}
			}
			if s.Same(append(append([]byte(nil), node...), id...)) || len(node) > 0 && s.Same(node[:len(node)-1]) {
				t.Fatal("a node of another size is recognised")
			}
		})
	}
}

// TestSeenNodeSharesExtensions checks that streams whose nodes differ only
// in their own fields share one copy of the extensions, and that a
// stream's copy does not alias the buffer its request was read into.
func TestSeenNodeSharesExtensions(t *testing.T) {
	a, b := repeatNode("n1", 20), repeatNode("n2-longer", 20)
	var sa, sb, sc SeenNode
	sa.Remember(a)
	sb.Remember(b)
	sc.Remember(repeatNodeFeatures("n1", 20, "f3"))
	if sa.extensions == (unique.Handle[string]{}) || sa.extensions != sb.extensions || sa.extensions != sc.extensions {
		t.Fatalf("the extensions are not shared: %v, %v, %v", sa.extensions, sb.extensions, sc.extensions)
	}
	if sa.extAt == sb.extAt {
		t.Fatal("the test's nodes should place their extensions apart")
	}
	kept := append([]byte(nil), a...)
	clear(a) // the read buffer, reused
	if !sa.Same(kept) {
		t.Fatal("the remembered extensions changed with the buffer they were read from")
	}
	if sa.Same(b) || sb.Same(kept) {
		t.Fatal("one node recognised as the other")
	}
	// A node with more extensions than is shared is remembered by hash.
	big := repeatNode("n3", MaxSharedExtensions/20)
	var sbig SeenNode
	sbig.Remember(big)
	if sbig.extensions != (unique.Handle[string]{}) || !sbig.Same(big) {
		t.Fatalf("a node of %d bytes: shared %v, recognised %v", len(big), sbig.extensions != (unique.Handle[string]{}), sbig.Same(big))
	}
}

// FuzzSeenNode: once a node that parses is remembered, exactly the same
// bytes are recognised (up to the hashes' collisions).
func FuzzSeenNode(f *testing.F) {
	ext := protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), []byte{0x0a, 0x01, 'e'})
	id := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("n"))
	f.Add(append(slices.Clip(id), ext...), append(slices.Clip(ext), id...))
	f.Add(repeatNode("a", 3), repeatNode("b", 3))
	f.Add(repeatNodeFeatures("a", 3, "x"), repeatNodeFeatures("a", 3, "y"))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if _, ok := NodeWithoutExtensions(a); !ok {
			return
		}
		var s SeenNode
		s.Remember(a)
		if !s.Same(bytes.Clone(a)) {
			t.Fatalf("%x: not recognised", a)
		}
		if s.Same(b) != bytes.Equal(a, b) {
			t.Fatalf("remembered %x: same(%x) = %v", a, b, s.Same(b))
		}
	})
}

// BenchmarkRepeatedNode compares recognising an Envoy's repeated node
// (about 300 extensions) by SeenNode with hashing it whole, as before.
func BenchmarkRepeatedNode(b *testing.B) {
	node := repeatNode("node-1", 300)
	b.Run("seenNode", func(b *testing.B) {
		var s SeenNode
		s.Remember(node)
		b.SetBytes(int64(len(node)))
		for b.Loop() {
			if !s.Same(node) {
				b.Fatal("not recognised")
			}
		}
	})
	b.Run("hash", func(b *testing.B) {
		want := maphash.Bytes(digestSeed, node)
		b.SetBytes(int64(len(node)))
		for b.Loop() {
			if maphash.Bytes(digestSeed, node) != want {
				b.Fatal("not recognised")
			}
		}
	})
}

// TestShrinkRequest checks what a request waiting for its stream's handler
// is shrunk to: the same request without its node's extensions, SotW and
// incremental, or nothing (the request is queued as it is) when its node
// has none, when it has no node, when the node is not where encoders write it,
// and when it does not parse.
func TestShrinkRequest(t *testing.T) {
	var node corev3.Node
	if err := proto.Unmarshal(repeatNode("n1", 300), &node); err != nil {
		t.Fatal(err)
	}
	noExt := proto.Clone(&node).(*corev3.Node)
	noExt.Extensions = nil
	marshal := func(m proto.Message) []byte {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sotw := &discovery.DiscoveryRequest{VersionInfo: "v1", Node: &node, ResourceNames: []string{"a", "b"}, TypeUrl: "t", ResponseNonce: "3"}
	delta := &discovery.DeltaDiscoveryRequest{Node: &node, TypeUrl: "t", ResourceNamesSubscribe: []string{"a"}, ResponseNonce: "3"}
	for _, tc := range []struct {
		name  string
		req   proto.Message
		field protowire.Number
	}{{"sotw", sotw, SotwReqNodeField}, {"delta", delta, DeltaReqNodeField}} {
		raw := marshal(tc.req)
		buf := ShrinkRequest(raw, tc.field)
		if buf == nil {
			t.Fatalf("%s: not shrunk", tc.name)
		}
		got := buf.ReadOnlyData()
		if want := len(WithoutNodeExtensions(raw, tc.field)); len(got) != want {
			t.Errorf("%s: shrunk to %d bytes, want %d", tc.name, len(got), want)
		}
		if len(got) >= len(raw)/4 {
			t.Errorf("%s: shrunk from %d to %d bytes, want the extensions gone", tc.name, len(raw), len(got))
		}
		back := tc.req.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(got, back); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := proto.Clone(tc.req)
		switch w := want.(type) {
		case *discovery.DiscoveryRequest:
			w.Node = noExt
		case *discovery.DeltaDiscoveryRequest:
			w.Node = noExt
		}
		if d := cmp.Diff(want, back, protocmp.Transform()); d != "" {
			t.Errorf("%s: shrunk (-want +got):\n%s", tc.name, d)
		}
		buf.Free()
	}

	same := func(what string, raw []byte, field protowire.Number) {
		t.Helper()
		if got := ShrinkRequest(raw, field); got != nil {
			t.Errorf("%s: shrunk to %d bytes, want the request left as it is", what, got.Len())
		}
	}
	same("node without extensions", marshal(&discovery.DiscoveryRequest{VersionInfo: "v1", Node: noExt, ResourceNames: []string{"a"}}), SotwReqNodeField)
	same("no node", marshal(&discovery.DiscoveryRequest{VersionInfo: "v1", ResourceNames: []string{"a"}, TypeUrl: "t"}), SotwReqNodeField)
	late := append(marshal(&discovery.DiscoveryRequest{ResourceNames: []string{"a"}}), marshal(&discovery.DiscoveryRequest{Node: &node})...)
	same("node after the names", late, SotwReqNodeField)
	cut := marshal(sotw)
	same("cut short", cut[:len(cut)/2], SotwReqNodeField)
}

// nodeFields counts req's node fields (field nodeField, of wire type
// bytes); -1 if req does not parse.
func nodeFields(req []byte, nodeField protowire.Number) int {
	c := 0
	for b := req; len(b) > 0; {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 {
			return -1
		}
		if num == nodeField && typ == protowire.BytesType {
			c++
		}
		b = b[n:]
	}
	return c
}

// FuzzShrinkRequest checks ShrinkRequest against WithoutNodeExtensions,
// which the handler decodes a request through: a shrunk request is
// shorter, is the same bytes when the request decodes and has one node,
// and decodes as the request does. The seeds hold a node tag in a longer
// varint than needed, two nodes, and extensions of other wire types.
func FuzzShrinkRequest(f *testing.F) {
	ext := &corev3.Node{Id: "n", Cluster: "c", Extensions: []*corev3.Extension{{Name: "a", Category: "x"}, {Name: "b"}}}
	sotw, _ := proto.Marshal(&discovery.DiscoveryRequest{VersionInfo: "v", Node: ext, ResourceNames: []string{"a", "b"}, TypeUrl: "t"})
	delta, _ := proto.Marshal(&discovery.DeltaDiscoveryRequest{Node: ext, TypeUrl: "t", ResourceNamesSubscribe: []string{"x"}})
	f.Add(sotw, true)
	f.Add(delta, false)
	n, _ := proto.Marshal(ext)
	long := append([]byte{0x0a, 1, 'v', 0x92, 0x00}, protowire.AppendVarint(nil, uint64(len(n)))...)
	f.Add(append(long, n...), true)
	node2 := protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 300)
	node2 = append(node2, n...)
	node2 = protowire.AppendFixed32(protowire.AppendTag(node2, 9, protowire.Fixed32Type), 7)
	two := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), node2)
	two = protowire.AppendBytes(protowire.AppendTag(two, 2, protowire.BytesType), n)
	f.Add(two, true)
	f.Fuzz(func(t *testing.T, req []byte, isSotw bool) {
		field := protowire.Number(DeltaReqNodeField)
		newReq := func() proto.Message { return new(discovery.DeltaDiscoveryRequest) }
		if isSotw {
			field = SotwReqNodeField
			newReq = func() proto.Message { return new(discovery.DiscoveryRequest) }
		}
		buf := ShrinkRequest(req, field)
		if buf == nil {
			return
		}
		defer buf.Free()
		got := buf.ReadOnlyData()
		if len(got) >= len(req) {
			t.Fatalf("shrunk %d bytes to %d", len(req), len(got))
		}
		want := WithoutNodeExtensions(req, field)
		// ShrinkRequest reads a request only as far as its node: where the
		// rest does not parse, decoding fails either way.
		if proto.Unmarshal(want, newReq()) != nil {
			return
		}
		if nodeFields(req, field) == 1 && !bytes.Equal(got, want) {
			t.Fatalf("shrunk to %x, want %x", got, want)
		}
		m1, m2 := newReq(), newReq()
		e1, e2 := proto.Unmarshal(WithoutNodeExtensions(got, field), m1), proto.Unmarshal(want, m2)
		if e1 != nil || e2 != nil {
			t.Fatalf("decoding: %v, want %v", e1, e2)
		}
		if d := cmp.Diff(m2, m1, protocmp.Transform()); d != "" {
			t.Fatalf("decodes otherwise (-want +got):\n%s", d)
		}
	})
}

// TestSotwAckHeadTwoNodes: a SotW request that gives its node twice is not
// read as a plain ACK's head (protobuf merges the two, and the handler
// decodes them all); once is.
func TestSotwAckHeadTwoNodes(t *testing.T) {
	good, _ := proto.Marshal(&corev3.Node{Id: "n1"})
	head := AppendString(nil, SotwReqVersionField, "v1")
	once := protowire.AppendBytes(protowire.AppendTag(head, SotwReqNodeField, protowire.BytesType), good)
	if _, node, _, ok := SotwAckHead(once); !ok || string(node) != string(good) {
		t.Fatalf("one node: ok %v, node %q", ok, node)
	}
	twice := protowire.AppendBytes(protowire.AppendTag(once[:len(once):len(once)], SotwReqNodeField, protowire.BytesType), []byte{0x0a, 0x02, 0xff, 0xfe})
	if _, _, _, ok := SotwAckHead(twice); ok {
		t.Fatal("two nodes read as a plain ACK's head")
	}
}
