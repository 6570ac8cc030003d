package main

import (
	"bytes"
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
)

// TestEDSRequestBytes checks that the requests clients encode themselves
// (edsRequest, deltaACK), written by the h2 client or by grpc-go's codec,
// are byte for byte what proto.Marshal writes, so that servers see what they
// would from any client.
func TestEDSRequestBytes(t *testing.T) {
	codec := encoding.GetCodecV2("proto")
	if _, ok := codec.(ackCodec); !ok {
		t.Fatalf("grpc-go's proto codec is a %T, not ackCodec", codec)
	}
	marshal := func(m proto.Message) []byte {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	check := func(what string, r encodedRequest, want []byte) {
		t.Helper()
		if got := r.appendTo(nil); !bytes.Equal(got, want) {
			t.Errorf("%s: appendTo\n got %x\nwant %x", what, got, want)
		}
		if r.size() != len(want) {
			t.Errorf("%s: size %d, want %d", what, r.size(), len(want))
		}
		bs, err := codec.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := bs.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("%s: codec\n got %x\nwant %x", what, got, want)
		}
		bs.Free()
	}
	envoy := newNode(nodeEnvoy, 3)
	envoyBytes := marshal(envoy)
	for _, tc := range []struct {
		version, nonce string
		names          []string
		node           *corev3.Node
	}{
		{"", "", nil, nil},
		{"", "", []string{"cluster-0"}, nil},
		{"v1", "", []string{"a", "b"}, nil},
		{"", "n1", []string{"a"}, envoy},
		{"2024-01-01T00:00:00Z/7f3a", "17", []string{clusterName(0), clusterName(999), "ünïcode", string(make([]byte, 200))}, envoy},
	} {
		want := marshal(&discovery.DiscoveryRequest{
			VersionInfo: tc.version, Node: tc.node, ResourceNames: tc.names, TypeUrl: endpointTypeURL, ResponseNonce: tc.nonce,
		})
		r := &edsRequest{version: tc.version, nonce: tc.nonce, names: encodeEDSNames(tc.names)}
		if tc.node != nil {
			r.node = envoyBytes
		}
		check(fmt.Sprintf("SotW %q %q %d names, node %v", tc.version, tc.nonce, len(tc.names), tc.node != nil), r, want)
		delta := &deltaACK{typeURL: endpointTypeURL, nonce: tc.nonce}
		if tc.node != nil {
			delta.node = envoyBytes
		}
		check(fmt.Sprintf("delta %q, node %v", tc.nonce, tc.node != nil), delta,
			marshal(&discovery.DeltaDiscoveryRequest{Node: tc.node, TypeUrl: endpointTypeURL, ResponseNonce: tc.nonce}))
	}
	// Other requests are encoded deterministically: a node's map is written
	// in the same order every time, as an Envoy repeats its node's bytes.
	req := &discovery.DiscoveryRequest{TypeUrl: clusterTypeURL, VersionInfo: "3", Node: envoy}
	want := marshal(req)
	for range 20 {
		bs, err := codec.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bs.Materialize(), want) {
			t.Fatal("the codec encodes a request with a node in different ways")
		}
	}
}
