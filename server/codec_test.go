package server

import (
	"slices"
	"testing"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// The pre-encoded responses must decode to exactly the messages they stand
// for.
func TestWireEncodingMatchesMessages(t *testing.T) {
	a := resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: "a"})
	b := resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: "b"}, resource.WithTTL(time.Minute))
	vh := resource.MustNew(&routev3.VirtualHost{Name: "rc/vh", Domains: []string{"x.com"}})

	cp := newControlPlane("replica-1 revision 42")
	sotw := &discovery.DiscoveryResponse{VersionInfo: "v1", TypeUrl: a.Type.URL, Nonce: "7",
		Resources: []*anypb.Any{a.Body, b.Body}}
	check(t, xdswire.SotwResponse(sotw, nil, [][]byte{a.SotWField(), b.SotWField()}, nil), sotw, new(discovery.DiscoveryResponse))
	lazy := &discovery.DiscoveryResponse{VersionInfo: "v1", TypeUrl: a.Type.URL, Nonce: "7", ControlPlane: cp.message()}
	withCP := &discovery.DiscoveryResponse{VersionInfo: "v1", TypeUrl: a.Type.URL, Nonce: "7", ControlPlane: cp.message(),
		Resources: sotw.Resources}
	check(t, xdswire.SotwResponse(lazy, cp.field(false), [][]byte{a.SotWField(), b.SotWField()}, func() { lazy.Resources = sotw.Resources }), withCP, new(discovery.DiscoveryResponse))

	deltaCheck := func(typ *resource.Type, items []item, removed []string, want *discovery.DeltaDiscoveryResponse) {
		entries := deltaEntries(typ, items, removed)
		parts := make([][]byte, len(entries))
		for i := range entries {
			parts[i] = entries[i].encoded(typ)
		}
		resp := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: want.SystemVersionInfo, TypeUrl: want.TypeUrl,
			Nonce: want.Nonce, RemovedResources: want.RemovedResources, ControlPlane: want.ControlPlane}
		var field []byte
		if want.ControlPlane != nil {
			field = cp.field(true)
		}
		check(t, xdswire.DeltaResponse(resp, field, parts, func() {
			for i := range entries {
				resp.Resources = append(resp.Resources, entries[i].message(typ))
			}
		}), want, new(discovery.DeltaDiscoveryResponse))
	}
	deltaCheck(vh.Type, []item{{key: "rc/x.com", res: vh, alias: true}, {key: "nope"}, {key: "gone"}}, []string{"gone"},
		&discovery.DeltaDiscoveryResponse{SystemVersionInfo: "v2", TypeUrl: vh.Type.URL, Nonce: "8",
			Resources: []*discovery.Resource{
				{Name: "rc/vh", Version: vh.Version, Resource: vh.Body, Aliases: []string{"rc/x.com"}},
				{Name: "nope", Aliases: []string{"nope"}},
			},
			RemovedResources: []string{"gone"}, ControlPlane: cp.message()})
	deltaCheck(b.Type, []item{{key: "b", res: b}}, nil, &discovery.DeltaDiscoveryResponse{TypeUrl: b.Type.URL, Nonce: "9",
		Resources: []*discovery.Resource{{Name: "b", Version: b.Version, Resource: b.Body, Ttl: durationpb.New(time.Minute)}}})
}

func check(t *testing.T, w *xdswire.Response, want, got proto.Message) {
	t.Helper()
	bs, err := Codec{}.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(bs.Materialize(), got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Fatalf("wire encoding decodes to (-want +got):\n%s", d)
	}
	// Other codecs marshal it from the message it stands for.
	b, err := proto.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	fresh := want.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, fresh); err != nil {
		t.Fatalf("fallback marshalling: %v", err)
	}
	if d := cmp.Diff(want, fresh, protocmp.Transform()); d != "" {
		t.Fatalf("fallback marshalling decodes to (-want +got):\n%s", d)
	}
}

func TestRawRequestDecodesLikeProto(t *testing.T) {
	req := &discovery.DiscoveryRequest{VersionInfo: "v", TypeUrl: resource.EndpointType, ResponseNonce: "3",
		ResourceNames: []string{"a", "b", "a"}, Node: &corev3.Node{Id: "n"}}
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	r := &xdswire.SotwRequest{Raw: raw}
	d, names, err := r.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if r.Msg.ResourceNames, err = names(); err != nil {
		t.Fatal(err)
	}
	nodeBack(t, &r.Node, &r.Msg.Node)
	if diff := cmp.Diff(req, &r.Msg, protocmp.Transform()); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	if d.Count != 3 {
		t.Fatalf("%d names counted, want 3", d.Count)
	}
	// The digest tells lists apart by their encoding.
	other := proto.Clone(req).(*discovery.DiscoveryRequest)
	other.ResourceNames = []string{"a", "b", "c"}
	raw2, _ := proto.Marshal(other)
	d2, _, _ := (&xdswire.SotwRequest{Raw: raw2}).Decode()
	same, _, _ := (&xdswire.SotwRequest{Raw: raw}).Decode()
	if d2 == d || same != d {
		t.Fatal("digests do not follow the names")
	}
}

// FuzzRawRequest checks the raw request scanner against a decoder of the
// API's descriptors that does not know the node's extensions (see
// lenientRequest): the same bytes must decode to the same request, or fail
// in both.
func FuzzRawRequest(f *testing.F) {
	for _, req := range []*discovery.DiscoveryRequest{
		{},
		{TypeUrl: resource.ClusterType, ResourceNames: []string{"a", "*", "b"}, VersionInfo: "v", ResponseNonce: "1"},
		{Node: &corev3.Node{Id: "n"}, ResourceNames: []string{"x"}, TypeUrl: resource.EndpointType},
	} {
		b, _ := proto.Marshal(req)
		f.Add(b)
	}
	f.Add([]byte{0x1a, 0x02, 0xff, 0xfe}) // invalid UTF-8 name
	f.Add([]byte{0x1a, 0x05, 'a'})        // truncated name
	f.Add([]byte{0x18, 0x01, 0x1a, 0x00}) // field 3 as a varint, then an empty name
	withExt, _ := proto.Marshal(&discovery.DiscoveryRequest{VersionInfo: "v", ResourceNames: []string{"x"}, Node: &corev3.Node{
		Id: "n", Extensions: []*corev3.Extension{{Name: "e1", Category: "c"}, {Name: "e2"}}, ClientFeatures: []string{"f"}}})
	f.Add(withExt)
	f.Add([]byte{0x12, 0x06, 0x0a, 0x01, 'n', 0x4a, 0x01, 0xff}) // node {id: n, extensions: garbage}
	// node {id: n, extensions: {name: e}, then a cluster cut short}, type URL
	f.Add([]byte{0x12, 0x0b, 0x0a, 0x01, 0x6e, 0x4a, 0x03, 0x0a, 0x01, 0x65, 0x12, 0x05, 0x78, 0x22, 0x01, 0x74})
	f.Fuzz(func(t *testing.T, data []byte) {
		want := new(discovery.DiscoveryRequest)
		wantErr := lenientDecode(t, data, want)
		r := &xdswire.SotwRequest{Raw: data}
		_, names, err := r.Decode()
		if err == nil {
			r.Msg.ResourceNames, err = names()
			nodeBack(t, &r.Node, &r.Msg.Node)
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("scanner error %v, reference error %v", err, wantErr)
		}
		if err == nil && !proto.Equal(&r.Msg, want) { // the fast check; the diff only to report
			t.Fatalf("scanner and reference differ (-reference +scanner):\n%s", cmp.Diff(want, &r.Msg, protocmp.Transform()))
		}
	})
}

// FuzzNodeSkipped holds the other decoders that skip the node's
// extensions to the same reference as FuzzRawRequest: an incremental
// request through Codec, and a node repeated in an ACK (nodeDecodesLocked).
func FuzzNodeSkipped(f *testing.F) {
	node, _ := proto.Marshal(&corev3.Node{Id: "n", Cluster: "c", Extensions: []*corev3.Extension{{Name: "e1", Category: "c"}}})
	f.Add(node)
	bad := append([]byte(nil), node...)
	bad[2] = 0xff // the id, not UTF-8: the remembered node's size and wire format, and it does not decode
	f.Add(bad)
	f.Add(protowire.AppendBytes(protowire.AppendTag(nil, xdswire.DeltaReqNodeField, protowire.BytesType), node))
	f.Add([]byte{0x0a, 0x0b, 0x0a, 0x01, 0x6e, 0x4a, 0x03, 0x0a, 0x01, 0x65, 0x12, 0x05, 0x78, 0x12, 0x01, 0x74})
	// Subscribed names (field 3), which the codec leaves encoded: among
	// other fields, not UTF-8, cut short, and field 3 as a varint.
	names, _ := proto.Marshal(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"a", "*", ""},
		ResourceNamesUnsubscribe: []string{"u"}, ResponseNonce: "1", Node: &corev3.Node{Id: "n", Extensions: []*corev3.Extension{{Name: "e"}}}})
	f.Add(names)
	f.Add(append(append([]byte{0x1a, 0x01, 'x'}, names...), 0x1a, 0x01, 'y'))
	f.Add([]byte{0x1a, 0x02, 0xff, 0xfe})
	f.Add([]byte{0x12, 0x01, 't', 0x1a, 0x05, 'a'})
	f.Add([]byte{0x18, 0x01, 0x1a, 0x00, 0x22, 0x01, 'u'})
	// initial_resource_versions, which the codec decodes itself when every
	// entry is a key and a value: with a node (the codec's path), entries
	// given twice, with a value only, a key twice, an unknown field, and
	// invalid UTF-8.
	initial, _ := proto.Marshal(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, Node: &corev3.Node{Id: "n"},
		InitialResourceVersions: map[string]string{"a": "1", "b": ""}})
	f.Add(initial)
	f.Add(append(append([]byte{}, initial...), 0x2a, 0x06, 0x0a, 0x01, 'a', 0x12, 0x01, '2'))
	f.Add(append(append([]byte{}, initial...), 0x2a, 0x03, 0x12, 0x01, 'v'))
	f.Add(append(append([]byte{}, initial...), 0x2a, 0x06, 0x0a, 0x01, 'a', 0x0a, 0x01, 'b'))
	f.Add(append(append([]byte{}, initial...), 0x2a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x01))
	f.Add(append(append([]byte{}, initial...), 0x2a, 0x03, 0x0a, 0x01, 0xff))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := new(discovery.DeltaDiscoveryRequest)
		wantErr := lenientDecode(t, data, want)
		var got xdswire.DeltaRequest
		err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &got)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("delta: codec error %v, reference error %v", err, wantErr)
		}
		if err == nil {
			nodeBack(t, &got.Node, &got.Msg.Node)
		}
		if err == nil && !proto.Equal(&got.Msg, want) { // the fast check; the diff only to report
			t.Fatalf("delta: codec and reference differ (-reference +codec):\n%s", cmp.Diff(want, &got.Msg, protocmp.Transform()))
		}
		wantErr = lenientDecode(t, data, new(corev3.Node))
		// A stream that remembers a node that decoded, then sees data
		// twice: the second time, from what it remembered of data if that
		// decoded.
		st := &stream{}
		if !st.nodeDecodesLocked(node) {
			t.Fatal("the seed's node does not decode")
		}
		for range 2 {
			if ok := st.nodeDecodesLocked(data); ok != (wantErr == nil) {
				t.Fatalf("nodeDecodesLocked = %v, reference error %v", ok, wantErr)
			}
		}
	})
}

// TestSubscribedNamesShared: an incremental request's subscribed names
// that the stream's snapshot has are the snapshot's strings, not copies
// (a first subscription names every cluster, on every client); others
// are decoded as they are.
func TestSubscribedNamesShared(t *testing.T) {
	snap := cache.MustSnapshot(resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: "c1"}))
	raw, _ := proto.Marshal(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType,
		ResourceNamesSubscribe: []string{"c1", "zz", "c1"}, ResponseNonce: "1"})
	for _, only := range []*resource.Type{nil, resource.Lookup(resource.EndpointType)} {
		r := xdswire.DeltaRequest{Snap: snap, Only: only}
		if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &r); err != nil {
			t.Fatal(err)
		}
		got := r.Msg.ResourceNamesSubscribe
		if !slices.Equal(got, []string{"c1", "zz", "c1"}) || r.Msg.ResponseNonce != "1" {
			t.Fatalf("decoded %q, nonce %q", got, r.Msg.ResponseNonce)
		}
		known := snap.Get(resource.Lookup(resource.EndpointType), "c1").Name
		if unsafe.StringData(got[0]) != unsafe.StringData(known) || unsafe.StringData(got[2]) != unsafe.StringData(known) {
			t.Fatal("a name the snapshot has is a copy, not the snapshot's")
		}
	}
}

// TestNodeExtensionsSkipped checks that requests are decoded without their
// node's extensions, whatever those hold, and otherwise as proto.Unmarshal
// decodes them: SotW by the scanner, incremental by the codec, and a node
// repeated in an ACK by nodeDecodesLocked.
func TestNodeExtensionsSkipped(t *testing.T) {
	node := &corev3.Node{Id: "n", Cluster: "c", ClientFeatures: []string{"f"},
		Extensions: []*corev3.Extension{{Name: "e1", Category: "c", TypeUrls: []string{"t"}}, {Name: "e2"}}}
	want := &corev3.Node{Id: "n", Cluster: "c", ClientFeatures: []string{"f"}}
	nodeBytes, _ := proto.Marshal(node)
	// Extensions that do not decode: field 9 holding an invalid UTF-8 name.
	badExt := protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), []byte{0x0a, 0x01, 0xff})
	badNode := append(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("n")), badExt...)
	if proto.Unmarshal(badNode, &corev3.Node{}) == nil {
		t.Fatal("the bad extensions decode")
	}
	for _, nb := range [][]byte{nodeBytes, badNode} {
		wantNode := want
		if len(nb) == len(badNode) {
			wantNode = &corev3.Node{Id: "n"}
		}
		sotw := protowire.AppendBytes(protowire.AppendTag(nil, xdswire.SotwReqNodeField, protowire.BytesType), nb)
		sotw = xdswire.AppendString(sotw, xdswire.SotwReqTypeURLField, resource.EndpointType)
		r := &xdswire.SotwRequest{Raw: sotw}
		_, _, err := r.Decode()
		nodeBack(t, &r.Node, &r.Msg.Node)
		if err != nil || r.Msg.TypeUrl != resource.EndpointType {
			t.Errorf("SotW: %v, %v", err, &r.Msg)
		}
		if d := cmp.Diff(wantNode, r.Msg.Node, protocmp.Transform()); d != "" {
			t.Errorf("SotW: node (-want +got):\n%s", d)
		}
		delta := xdswire.AppendString(nil, xdswire.DeltaReqTypeURLField, resource.EndpointType)
		delta = protowire.AppendBytes(protowire.AppendTag(delta, xdswire.DeltaReqNodeField, protowire.BytesType), nb)
		delta = xdswire.AppendString(delta, xdswire.DeltaReqNonceField, "7")
		var d xdswire.DeltaRequest
		err = (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(delta)}, &d)
		nodeBack(t, &d.Node, &d.Msg.Node)
		if err != nil || d.Msg.TypeUrl != resource.EndpointType || d.Msg.ResponseNonce != "7" {
			t.Errorf("delta: %v, %v", err, &d.Msg)
		}
		if diff := cmp.Diff(wantNode, d.Msg.Node, protocmp.Transform()); diff != "" {
			t.Errorf("delta: node (-want +got):\n%s", diff)
		}
		// Another service's request on the same server is decoded whole.
		var other discovery.DeltaDiscoveryRequest
		err = (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(delta)}, &other)
		if len(nb) == len(nodeBytes) && (err != nil || len(other.Node.GetExtensions()) != 2) {
			t.Errorf("a plain DeltaDiscoveryRequest: %v, %v", err, &other)
		}
		st := &stream{}
		if !st.nodeDecodesLocked(nb) {
			t.Errorf("nodeDecodesLocked(%x) = false", nb)
		}
	}
	if got := xdswire.WithoutNodeExtensions([]byte{0x12, 0x05, 0x4a}, xdswire.SotwReqNodeField); len(got) != 3 {
		t.Errorf("a request that does not parse changed: %x", got)
	}
}

// nodeBack puts the node a request's xdswire.RequestNode took back into the
// request's message, for comparison with a decoder that keeps it there,
// after checking that the node's kept encoding decodes to it.
func nodeBack(t *testing.T, rn *xdswire.RequestNode, dst **corev3.Node) {
	t.Helper()
	if rn.Msg == nil {
		if rn.Raw != nil {
			t.Fatalf("a kept node's encoding without the node")
		}
		return
	}
	n := new(corev3.Node)
	if err := proto.Unmarshal(rn.Raw, n); err != nil || len(n.GetExtensions()) > 0 {
		t.Fatalf("the kept node's encoding decodes to %v (%v)", n, err)
	}
	if d := cmp.Diff(rn.Msg, n, protocmp.Transform()); d != "" {
		t.Fatalf("the kept node's encoding decodes to another node (-kept +decoded):\n%s", d)
	}
	*dst = rn.Msg
}

// TestNodeMapEntryKeyOfWrongWireType: a node whose dynamic_parameters
// entry has its key in the wrong wire type, on which protobuf-go's
// reflective decoder panics (found by FuzzNodeSkipped), decodes: the
// generated decoders take the key as empty.
func TestNodeMapEntryKeyOfWrongWireType(t *testing.T) {
	node := []byte("b\b\n\x010\r0000") // dynamic_parameters: {key: fixed32}
	if err := proto.Unmarshal(node, new(corev3.Node)); err != nil {
		t.Fatalf("the node: %v", err)
	}
	st := &stream{}
	for i := range 2 { // the second time from what it remembered
		if !st.nodeDecodesLocked(node) {
			t.Fatalf("nodeDecodesLocked refuses the node (time %d)", i+1)
		}
	}
	req := protowire.AppendBytes(protowire.AppendTag(nil, xdswire.DeltaReqNodeField, protowire.BytesType), node)
	var got xdswire.DeltaRequest
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(req)}, &got); err != nil {
		t.Fatalf("a delta request with the node: %v", err)
	}
}
