package server

import (
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// TestNodeNestingLimit: a node nested as deep as a request may be decodes
// as part of its request, and one level deeper fails, as proto.Unmarshal
// decides for the whole request, although the server decodes the node on
// its own: on both variants, and for a node repeated in an ACK.
func TestNodeNestingLimit(t *testing.T) {
	var accepted, refused int
	for depth := 4990; depth <= 5010; depth++ {
		sotw := NestedNodeRequest(depth, false)
		ref := proto.Unmarshal(sotw, new(discovery.DiscoveryRequest))
		if ref == nil {
			accepted++
		} else {
			refused++
		}
		r := &xdswire.SotwRequest{Raw: sotw}
		if _, _, err := r.Decode(); (ref == nil) != (err == nil) {
			t.Errorf("SotW, depth %d: proto.Unmarshal: %v; the server: %v", depth, ref, err)
		}
		delta := NestedNodeRequest(depth, true)
		ref = proto.Unmarshal(delta, new(discovery.DeltaDiscoveryRequest))
		var d xdswire.DeltaRequest
		if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(delta)}, &d); (ref == nil) != (err == nil) {
			t.Errorf("delta, depth %d: proto.Unmarshal: %v; the server: %v", depth, ref, err)
		}
		_, _, tagLen := protowire.ConsumeTag(delta)
		node, _ := protowire.ConsumeBytes(delta[tagLen:])
		if ok := (&stream{}).nodeDecodesLocked(node); ok != (ref == nil) {
			t.Errorf("repeated in an ACK, depth %d: proto.Unmarshal: %v; nodeDecodesLocked: %v", depth, ref, ok)
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("the depths tried do not straddle the limit: %d accepted, %d refused", accepted, refused)
	}
}

// NestedNodeRequest returns the encoding of a request (a DiscoveryRequest,
// or a DeltaDiscoveryRequest if delta) whose node metadata nests depth
// ListValues, built without recursion.
func NestedNodeRequest(depth int, delta bool) []byte {
	// Sizes from the inside out: v[k] is the size of a Value nesting k
	// lists; a Value{list_value: ListValue{values: [inner]}}.
	v := make([]int, depth+1)
	lv := make([]int, depth+1)
	for k := 1; k <= depth; k++ {
		lv[k] = 1 + protowire.SizeVarint(uint64(v[k-1])) + v[k-1]
		v[k] = 1 + protowire.SizeVarint(uint64(lv[k])) + lv[k]
	}
	var val []byte
	for k := depth; k >= 1; k-- {
		val = protowire.AppendTag(val, 6, protowire.BytesType) // Value.list_value
		val = protowire.AppendVarint(val, uint64(lv[k]))
		val = protowire.AppendTag(val, 1, protowire.BytesType) // ListValue.values
		val = protowire.AppendVarint(val, uint64(v[k-1]))
	}
	var entry []byte // Struct.fields entry {key: "k", value: val}
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, "k")
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendBytes(entry, val)
	var st []byte // Struct
	st = protowire.AppendTag(st, 1, protowire.BytesType)
	st = protowire.AppendBytes(st, entry)
	var node []byte // Node{id: "deep", metadata: st}
	node = protowire.AppendTag(node, 1, protowire.BytesType)
	node = protowire.AppendString(node, "deep")
	node = protowire.AppendTag(node, 3, protowire.BytesType)
	node = protowire.AppendBytes(node, st)
	nodeField, typeField := protowire.Number(xdswire.SotwReqNodeField), protowire.Number(xdswire.SotwReqTypeURLField)
	if delta {
		nodeField, typeField = xdswire.DeltaReqNodeField, xdswire.DeltaReqTypeURLField
	}
	var req []byte // {node: node, type_url: EDS}
	req = protowire.AppendTag(req, nodeField, protowire.BytesType)
	req = protowire.AppendBytes(req, node)
	req = protowire.AppendTag(req, typeField, protowire.BytesType)
	req = protowire.AppendString(req, resource.EndpointType)
	return req
}
