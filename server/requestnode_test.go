package server

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/server/internal/xdswire"
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

	var first xdswire.RequestNode
	if err := first.Take(full); err != nil {
		t.Fatal(err)
	}
	back := new(corev3.Node)
	if err := proto.Unmarshal(first.Raw, back); err != nil {
		t.Fatalf("the kept encoding does not decode: %v", err)
	}
	if d := cmp.Diff(want, back, protocmp.Transform()); d != "" {
		t.Fatalf("kept encoding decodes to (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, first.Msg, protocmp.Transform()); d != "" {
		t.Fatalf("kept node (-want +got):\n%s", d)
	}
	if string(first.Raw) != string(stripped) {
		t.Fatal("the kept encoding is not the node's without its extensions")
	}

	// Extensions that do not decode are skipped, not checked.
	badExt := append(append([]byte(nil), stripped...), protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), []byte{0x0a, 0x01, 0xff})...)
	for _, known := range [][]byte{full, stripped, badExt} {
		r := xdswire.RequestNode{Known: first.Raw}
		if err := r.Take(known); err != nil || r.Raw != nil || r.Msg != nil {
			t.Errorf("a known node: kept %q, %v, %v; want nothing", r.Raw, r.Msg, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		r := xdswire.RequestNode{Known: first.Raw}
		_ = r.Take(full)
	}); n != 0 {
		t.Errorf("a known node repeated costs %v allocations, want 0", n)
	}

	other := proto.Clone(node).(*corev3.Node)
	other.Id = "n2"
	otherBytes, _ := proto.Marshal(other)
	r := xdswire.RequestNode{Known: first.Raw}
	if err := r.Take(otherBytes); err != nil || r.Msg.GetId() != "n2" {
		t.Errorf("another node: %v, %v; want it decoded", r.Msg, err)
	}
	badID := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff})
	r = xdswire.RequestNode{Known: first.Raw}
	if err := r.Take(badID); err == nil {
		t.Error("a node whose id is not UTF-8 was taken")
	}
}

// FuzzRequestNodeKnown holds xdswire.RequestNode.Take, for a stream that knows a
// node, to the reference decoder of FuzzRawRequest (which does not know the
// node's extensions): a node that the reference cannot decode is refused,
// and one it decodes is either taken, decoded as the reference decodes it,
// or passed over as the known node, which it must then decode to.
func FuzzRequestNodeKnown(f *testing.F) {
	knownMsg := &corev3.Node{Id: "n", Cluster: "c", ClientFeatures: []string{"f"}}
	known, _ := proto.Marshal(knownMsg)
	f.Add(known)
	withExt := proto.Clone(knownMsg).(*corev3.Node)
	withExt.Extensions = []*corev3.Extension{{Name: "e1", Category: "x"}}
	full, _ := proto.Marshal(withExt)
	f.Add(full)
	f.Add(append(append([]byte(nil), known...), 0x4a, 0x03, 0x0a, 0x01, 0xff)) // extensions that do not decode
	f.Add(append(append([]byte(nil), known...), 0x52, 0x01, 0xff))             // a feature that is not UTF-8
	f.Add(append([]byte{0x12, 0x01, 'd'}, known[3:]...))                       // no id, a cluster given twice
	f.Add([]byte{0x0a, 0x05, 'n'})
	f.Fuzz(func(t *testing.T, data []byte) {
		want := new(corev3.Node)
		wantErr := lenientDecode(t, data, want)
		r := xdswire.RequestNode{Known: known}
		err := r.Take(data)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("take: %v; the reference: %v", err, wantErr)
		}
		if err != nil {
			return
		}
		got := r.Msg
		if got == nil {
			got = knownMsg // passed over as known
		} else if back := new(corev3.Node); proto.Unmarshal(r.Raw, back) != nil || !proto.Equal(back, got) {
			t.Fatalf("kept %q, which does not decode to %v", r.Raw, got)
		}
		if !proto.Equal(got, want) { // the fast check; the diff only to report
			t.Fatalf("take differs from the reference (-reference +take):\n%s", cmp.Diff(want, got, protocmp.Transform()))
		}
	})
}
