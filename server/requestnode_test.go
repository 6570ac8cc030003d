package server

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestRequestNodeTakesOnlyANewNode: a request's node is decoded and kept,
// without its extensions, only if the stream does not know it yet; a node
// the stream knows, with or without its extensions, costs a comparison and
// no allocation; a node that differs is checked again and must decode.
func TestRequestNodeTakesOnlyANewNode(t *testing.T) {
	node := &corev3.Node{Id: "n1", Cluster: "c",
		Metadata:       &structpb.Struct{Fields: map[string]*structpb.Value{"role": structpb.NewStringValue("canary")}},
		ClientFeatures: []string{"f"},
		Extensions:     []*corev3.Extension{{Name: "e1", Category: "x"}, {Name: "e2"}}}
	full, _ := proto.MarshalOptions{Deterministic: true}.Marshal(node)
	want := proto.Clone(node).(*corev3.Node)
	want.Extensions = nil
	stripped, _ := proto.MarshalOptions{Deterministic: true}.Marshal(want)

	var first requestNode
	if err := first.take(full); err != nil {
		t.Fatal(err)
	}
	back := new(corev3.Node)
	if err := proto.Unmarshal(first.raw, back); err != nil || !proto.Equal(back, want) || !proto.Equal(first.msg, want) {
		t.Fatalf("kept %v (%v) and %v, want %v", back, err, first.msg, want)
	}
	if string(first.raw) != string(stripped) {
		t.Fatal("the kept encoding is not the node's without its extensions")
	}

	// Extensions that do not decode are skipped, not checked.
	badExt := append(append([]byte(nil), stripped...), protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), []byte{0x0a, 0x01, 0xff})...)
	for _, known := range [][]byte{full, stripped, badExt} {
		r := requestNode{known: first.raw}
		if err := r.take(known); err != nil || r.raw != nil || r.msg != nil {
			t.Errorf("a known node: kept %q, %v, %v; want nothing", r.raw, r.msg, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		r := requestNode{known: first.raw}
		_ = r.take(full)
	}); n != 0 {
		t.Errorf("a known node repeated costs %v allocations, want 0", n)
	}

	other := proto.Clone(node).(*corev3.Node)
	other.Id = "n2"
	otherBytes, _ := proto.Marshal(other)
	r := requestNode{known: first.raw}
	if err := r.take(otherBytes); err != nil || r.msg.GetId() != "n2" {
		t.Errorf("another node: %v, %v; want it decoded", r.msg, err)
	}
	badID := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff})
	r = requestNode{known: first.raw}
	if err := r.take(badID); err == nil {
		t.Error("a node whose id is not UTF-8 was taken")
	}
}
