package main

import (
	"bytes"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
)

// TestEDSRequestBytes checks that an edsRequest, written by the h2 client or
// by grpc-go's codec, is byte for byte the DiscoveryRequest proto.Marshal
// writes, so that servers see what they would from any client.
func TestEDSRequestBytes(t *testing.T) {
	codec := encoding.GetCodecV2("proto")
	if _, ok := codec.(ackCodec); !ok {
		t.Fatalf("grpc-go's proto codec is a %T, not ackCodec", codec)
	}
	for _, tc := range []struct {
		version, nonce string
		names          []string
	}{
		{"", "", nil},
		{"", "", []string{"cluster-0"}},
		{"v1", "", []string{"a", "b"}},
		{"", "n1", []string{"a"}},
		{"2024-01-01T00:00:00Z/7f3a", "17", []string{clusterName(0), clusterName(999), "ünïcode", string(make([]byte, 200))}},
	} {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&discovery.DiscoveryRequest{
			VersionInfo: tc.version, ResourceNames: tc.names, TypeUrl: endpointTypeURL, ResponseNonce: tc.nonce,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := &edsRequest{version: tc.version, nonce: tc.nonce, names: encodeEDSNames(tc.names)}
		if got := r.appendTo(nil); !bytes.Equal(got, want) {
			t.Errorf("%+v: appendTo\n got %x\nwant %x", tc, got, want)
		}
		if r.size() != len(want) {
			t.Errorf("%+v: size %d, want %d", tc, r.size(), len(want))
		}
		bs, err := codec.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := bs.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("%+v: codec\n got %x\nwant %x", tc, got, want)
		}
		bs.Free()
	}
	// Anything else goes through the proto codec as it is.
	req := &discovery.DiscoveryRequest{TypeUrl: clusterTypeURL, VersionInfo: "3"}
	bs, err := codec.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := proto.Marshal(req); !bytes.Equal(bs.Materialize(), want) {
		t.Errorf("codec changed a DiscoveryRequest: %x, want %x", bs.Materialize(), want)
	}
}
