package server

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// keptNode returns what the server keeps of a node: n without its
// extensions. An Envoy lists there every extension it was built with, some
// 300: tens of KB on the wire and several times that decoded, which the
// server has no use for and which, kept per stream, would be most of its
// memory. A stream keeps
// the encoding of this node (see xdswire.RequestNode and encodeNode); its status
// shows it, and the cache groups it by it. The result is a new message
// that shares n's other fields; neither is changed afterwards.
func keptNode(n *corev3.Node) *corev3.Node {
	k := new(corev3.Node)
	if n == nil {
		return k
	}
	src, dst := n.ProtoReflect(), k.ProtoReflect()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd != xdswire.NodeExtensions {
			dst.Set(fd, v)
		}
		return true
	})
	dst.SetUnknown(src.GetUnknown())
	return k
}

// encodeNode returns the encoding of a node a stream keeps (see keptNode),
// for a request that another codec decoded whole; never nil.
func encodeNode(n *corev3.Node) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(n) // a decoded message encodes
	if b == nil {
		b = []byte{}
	}
	return b
}
