package server

import (
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// fastPathsStream is a transport stream that offers the fast paths and
// keeps what the server sets.
type fastPathsStream struct {
	inline func([]byte) bool
	shrink func([]byte) mem.Buffer
}

func (f *fastPathsStream) SetInline(fn func([]byte) bool)       { f.inline = fn }
func (f *fastPathsStream) SetShrink(fn func([]byte) mem.Buffer) { f.shrink = fn }

// TestFastPathsShrinkEachVariantsNode checks that a stream sets its
// transport up to shrink its own variant's requests: the node is field 2
// of a SotW request and field 1 of an incremental one.
func TestFastPathsShrinkEachVariantsNode(t *testing.T) {
	node := corev3.Node{Id: "n1"}
	for i := range 300 {
		node.Extensions = append(node.Extensions, &corev3.Extension{Name: fmt.Sprintf("envoy.ext.%d", i)})
	}
	for _, tc := range []struct {
		delta bool
		req   proto.Message
	}{
		{false, &discovery.DiscoveryRequest{VersionInfo: "v1", Node: &node, TypeUrl: "t", ResponseNonce: "3"}},
		{true, &discovery.DeltaDiscoveryRequest{Node: &node, TypeUrl: "t", ResponseNonce: "3"}},
	} {
		var f fastPathsStream
		(&stream{delta: tc.delta}).useFastPaths(&f)
		if f.inline == nil || f.shrink == nil {
			t.Fatalf("delta %v: fast paths not set", tc.delta)
		}
		raw, err := proto.Marshal(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		buf := f.shrink(raw)
		if buf == nil {
			t.Fatalf("delta %v: a request repeating a node with 300 extensions was not shrunk", tc.delta)
		}
		back := tc.req.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(buf.ReadOnlyData(), back); err != nil {
			t.Fatalf("delta %v: %v", tc.delta, err)
		}
		buf.Free()
		if got := back.ProtoReflect().Get(back.ProtoReflect().Descriptor().Fields().ByName("node")).Message().Interface().(*corev3.Node); got.GetId() != "n1" || len(got.GetExtensions()) != 0 {
			t.Errorf("delta %v: shrunk to node %v", tc.delta, got)
		}
	}
}
