package xdswire

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// NodeExtensions is the field Node.extensions.
var NodeExtensions = (&corev3.Node{}).ProtoReflect().Descriptor().Fields().ByName("extensions")

// WithoutNodeExtensions returns req, an encoded request whose node is field
// nodeField, without its node's extensions, so that decoding it does not
// build the extensions only to drop them (the server keeps no node's
// extensions). The server's codec decodes a request so only if it has
// more than one node field, which protobuf merges; otherwise it cuts the
// node out (RequestNode). It returns req itself if there is nothing to
// leave out, or if req does not parse (decoding it then fails as it would
// have). The extensions are skipped, not checked.
func WithoutNodeExtensions(req []byte, nodeField protowire.Number) []byte {
	var out []byte // nil until a node has extensions
	for b := req; len(b) > 0; {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 {
			return req
		}
		field := b[:n]
		b = b[n:]
		if num != nodeField || typ != protowire.BytesType {
			if out != nil {
				out = append(out, field...)
			}
			continue
		}
		_, _, tagLen := protowire.ConsumeTag(field)
		node, _ := protowire.ConsumeBytes(field[tagLen:])
		kept, ok := NodeWithoutExtensions(node)
		if !ok {
			return req
		}
		if len(kept) == len(node) && out == nil {
			continue
		}
		if out == nil {
			out = append([]byte(nil), req[:len(req)-len(b)-len(field)]...) // not sized for req: the extensions are most of it
		}
		out = protowire.AppendTag(out, nodeField, protowire.BytesType)
		out = protowire.AppendBytes(out, kept)
	}
	if out == nil {
		return req
	}
	return out
}

// ShrinkRequest returns req without its node's extensions, for a request
// waiting for its stream's handler, which decodes it without them anyway:
// while a stream is busy (an initial sync), an Envoy's requests, each
// repeating its node, wait at a few KB rather than tens. The copy is made
// once, at its size, in a buffer from gRPC's pool, freed once the handler
// has the request. It returns nil if there is nothing to leave out, or if
// req does not parse as far as its node. It looks for the node only where
// protobuf encoders write it, in field order, so that a request without
// one (a SotW request naming 1,000 clusters) costs a glance.
func ShrinkRequest(req []byte, nodeField protowire.Number) mem.Buffer {
	for b := req; len(b) > 0; {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 || num > nodeField {
			return nil
		}
		if num != nodeField || typ != protowire.BytesType {
			b = b[n:]
			continue
		}
		_, _, tagLen := protowire.ConsumeTag(b)
		node, _ := protowire.ConsumeBytes(b[tagLen:n])
		ext, ok := extensionsSize(node)
		if !ok || ext == 0 {
			return nil
		}
		head, tail := req[:len(req)-len(b)], b[n:]
		kept := len(node) - ext
		size := len(head) + protowire.SizeTag(nodeField) + protowire.SizeVarint(uint64(kept)) + kept + len(tail)
		pool := mem.DefaultBufferPool()
		buf := pool.Get(size)
		out := append((*buf)[:0], head...)
		out = protowire.AppendTag(out, nodeField, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(kept))
		out = appendNodeWithoutExtensions(out, node)
		*buf = append(out, tail...)
		return mem.NewBuffer(buf, pool)
	}
	return nil
}

// extensionsSize returns the bytes node's extensions fields take; false if
// node does not parse.
func extensionsSize(node []byte) (int, bool) {
	size := 0
	for b := node; len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return 0, false
		}
		if num == NodeExtensions.Number() {
			size += n
		}
		b = b[n:]
	}
	return size, true
}

// NodeWithoutExtensions returns an encoded Node without its extensions
// fields: node itself if it has none. It reports false if node does not
// parse.
func NodeWithoutExtensions(node []byte) ([]byte, bool) {
	ext, ok := extensionsSize(node)
	if !ok || ext == 0 {
		return node, ok
	}
	return appendNodeWithoutExtensions(make([]byte, 0, len(node)-ext), node), true
}

// appendNodeWithoutExtensions appends node's fields but its extensions to
// dst; node must parse (see extensionsSize).
func appendNodeWithoutExtensions(dst, node []byte) []byte {
	for b := node; len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if num != NodeExtensions.Number() {
			dst = append(dst, b[:n]...)
		}
		b = b[n:]
	}
	return dst
}

// RequestNode is a request's node as the server's codec leaves it: cut
// out of the request before decoding, so that only a stream's first node
// is decoded (an Envoy repeats its node in every request), and kept as its
// encoding.
type RequestNode struct {
	// Known is the encoding of the node the stream keeps (nil before its
	// first request), set before decoding.
	Known []byte
	// Raw and Msg are a node the stream does not know yet: its encoding
	// without its extensions (a copy), and Raw decoded. Both are nil if the
	// request has no node, or the node the stream keeps.
	Raw []byte
	Msg *corev3.Node
}

// Take checks node, the encoding of the request's node as received: unless
// it is, but for its extensions, the node the stream keeps, it must decode
// without its extensions (the extensions are skipped, not checked), and
// it is kept in Raw and Msg. (ACKs taken inline, most of the requests
// that repeat a node, are checked with a SeenNode instead, which compares
// the whole node with the last one that decoded without walking its ~300
// extensions.)
func (r *RequestNode) Take(node []byte) error {
	if r.Known != nil && sameButExtensions(node, r.Known) {
		return nil
	}
	kept, _ := NodeWithoutExtensions(node) // node itself if it does not parse: decoding then fails
	msg := new(corev3.Node)
	if err := NodeDecoding.Unmarshal(kept, msg); err != nil {
		return err
	}
	r.Raw, r.Msg = append([]byte{}, kept...), msg // never nil: a node that has no field is still a node
	return nil
}

// sameButExtensions reports whether node, an encoded Node, is known but for
// its extensions fields: known's fields in the same order and encoding.
func sameButExtensions(node, known []byte) bool {
	for b := node; len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return false
		}
		if num != NodeExtensions.Number() {
			if len(known) < n || string(known[:n]) != string(b[:n]) {
				return false
			}
			known = known[n:]
		}
		b = b[n:]
	}
	return len(known) == 0
}

// NodeDecoding decodes a request's node on its own as it decodes as part
// of its request: one level of nesting less is left to it.
var NodeDecoding = proto.UnmarshalOptions{RecursionLimit: protowire.DefaultRecursionLimit - 1}
