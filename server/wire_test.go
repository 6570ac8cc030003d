package server

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/resource"
)

// The pre-encoded responses must decode to exactly the messages they stand
// for.
func TestWireEncodingMatchesMessages(t *testing.T) {
	a := resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: "a"})
	b := resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: "b"}, resource.WithTTL(time.Minute))
	vh := resource.MustNew(&routev3.VirtualHost{Name: "rc/vh", Domains: []string{"x.com"}})

	sotw := &discovery.DiscoveryResponse{VersionInfo: "v1", TypeUrl: a.Type.URL, Nonce: "7",
		Resources: []*anypb.Any{a.Body, b.Body}}
	check(t, sotwWire(sotw, [][]byte{a.SotWField(), b.SotWField()}, nil), sotw, new(discovery.DiscoveryResponse))
	lazy := &discovery.DiscoveryResponse{VersionInfo: "v1", TypeUrl: a.Type.URL, Nonce: "7"}
	check(t, sotwWire(lazy, [][]byte{a.SotWField(), b.SotWField()}, func() { lazy.Resources = sotw.Resources }), sotw, new(discovery.DiscoveryResponse))

	deltaCheck := func(typ *resource.Type, items []item, removed []string, want *discovery.DeltaDiscoveryResponse) {
		entries := deltaEntries(typ, items, removed)
		parts := make([][]byte, len(entries))
		for i := range entries {
			parts[i] = entries[i].encoded(typ)
		}
		resp := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: want.SystemVersionInfo, TypeUrl: want.TypeUrl,
			Nonce: want.Nonce, RemovedResources: want.RemovedResources}
		check(t, deltaWire(resp, parts, func() {
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
			RemovedResources: []string{"gone"}})
	deltaCheck(b.Type, []item{{key: "b", res: b}}, nil, &discovery.DeltaDiscoveryResponse{TypeUrl: b.Type.URL, Nonce: "9",
		Resources: []*discovery.Resource{{Name: "b", Version: b.Version, Resource: b.Body, Ttl: durationpb.New(time.Minute)}}})
}

func check(t *testing.T, w *wireResponse, want, got proto.Message) {
	t.Helper()
	bs, err := Codec{}.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(bs.Materialize(), got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("wire encoding decodes to\n%v\nwant\n%v", got, want)
	}
	// Other codecs marshal it from the message it stands for.
	b, err := proto.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	fresh := want.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, fresh); err != nil || !proto.Equal(fresh, want) {
		t.Fatalf("fallback marshalling: %v, %v", err, fresh)
	}
}

func TestRawRequestDecodesLikeProto(t *testing.T) {
	req := &discovery.DiscoveryRequest{VersionInfo: "v", TypeUrl: resource.EndpointType, ResponseNonce: "3",
		ResourceNames: []string{"a", "b", "a"}, Node: &corev3.Node{Id: "n"}}
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	r := &sotwRequest{raw: raw}
	d, names, err := r.decode()
	if err != nil {
		t.Fatal(err)
	}
	if r.msg.ResourceNames, err = names(); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&r.msg, req) || d.count != 3 {
		t.Fatalf("decoded %v (%d names), want %v", &r.msg, d.count, req)
	}
	// The digest tells lists apart by their encoding.
	other := proto.Clone(req).(*discovery.DiscoveryRequest)
	other.ResourceNames = []string{"a", "b", "c"}
	raw2, _ := proto.Marshal(other)
	d2, _, _ := (&sotwRequest{raw: raw2}).decode()
	same, _, _ := (&sotwRequest{raw: raw}).decode()
	if d2 == d || same != d {
		t.Fatal("digests do not follow the names")
	}
}

// FuzzRawRequest checks the raw request scanner against proto.Unmarshal:
// the same bytes must decode to the same request, or fail in both.
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
	f.Fuzz(func(t *testing.T, data []byte) {
		var want discovery.DiscoveryRequest
		wantErr := proto.Unmarshal(data, &want)
		r := &sotwRequest{raw: data}
		_, names, err := r.decode()
		if err == nil {
			r.msg.ResourceNames, err = names()
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("scanner error %v, proto.Unmarshal error %v", err, wantErr)
		}
		if err == nil && !proto.Equal(&r.msg, &want) {
			t.Fatalf("scanner decoded %v, proto.Unmarshal %v", &r.msg, &want)
		}
	})
}
