package server

import (
	"encoding/binary"
	"hash/maphash"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the request fields a plain ACK carries.
const (
	sotwReqVersionField  = 1 // DiscoveryRequest.version_info
	sotwReqNodeField     = 2 // DiscoveryRequest.node
	sotwReqTypeURLField  = 4 // DiscoveryRequest.type_url
	sotwReqNonceField    = 5 // DiscoveryRequest.response_nonce
	deltaReqNodeField    = 1 // DeltaDiscoveryRequest.node
	deltaReqTypeURLField = 2 // DeltaDiscoveryRequest.type_url
	deltaReqNonceField   = 6 // DeltaDiscoveryRequest.response_nonce
)

// inlineReceiver is a gRPC stream that can pass messages to its handler on
// the connection's reader goroutine (h2grpc's streams are).
type inlineReceiver interface {
	SetInline(fn func(msg []byte) bool)
}

// shrinker is a gRPC stream that lets its handler shrink the requests
// that wait for it (h2grpc's streams are).
type shrinker interface {
	SetShrink(fn func(msg []byte) mem.Buffer)
}

// partsSender is a gRPC stream that sends a message from its encoded parts
// (h2grpc's streams are).
type partsSender interface {
	SendParts(parts [][]byte) error
}

// transportStream returns the transport's stream under gs, which
// grpc.GenericServerStream hides.
func transportStream(gs any) any {
	switch g := gs.(type) {
	case *grpc.GenericServerStream[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]:
		return g.ServerStream
	case *grpc.GenericServerStream[discovery.DiscoveryRequest, discovery.DiscoveryResponse]:
		return g.ServerStream
	}
	return gs
}

// useFastPaths sets st up to take ACKs inline, to hold the requests that
// wait without their node's extensions, and to send from parts, as far as
// gs's transport allows.
func (st *stream) useFastPaths(gs any) {
	ack, nodeField := st.ackSotwInline, protowire.Number(sotwReqNodeField)
	if st.delta {
		ack, nodeField = st.ackDeltaInline, deltaReqNodeField
	}
	ts := transportStream(gs)
	if r, ok := ts.(inlineReceiver); ok {
		r.SetInline(ack)
	}
	if s, ok := ts.(shrinker); ok {
		s.SetShrink(func(req []byte) mem.Buffer { return shrinkRequest(req, nodeField) })
	}
	if s, ok := ts.(partsSender); ok {
		st.sendParts = s.SendParts
	}
}

// ackDeltaInline takes an incremental request on the connection's reader
// goroutine if it is a plain ACK (a type URL and the nonce of the type's
// latest response, nothing else but the node, which only a stream's first
// request sets): what most requests are once a stream runs. Anything else,
// or a stream busy in a turn, is left to the handler (false).
func (st *stream) ackDeltaInline(raw []byte) bool {
	var typeURL, nonce, node []byte
	nodes := 0
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return false
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return false
		}
		switch num {
		case deltaReqTypeURLField:
			typeURL = v
		case deltaReqNonceField:
			nonce = v
		case deltaReqNodeField: // Envoy repeats it unless told not to
			if nodes++; nodes > 1 {
				return false // merged by protobuf: left to the handler, which decodes them all
			}
			node = v
		default:
			return false
		}
		b = b[n+m:]
	}
	if len(nonce) == 0 {
		return false
	}
	return st.ackInline(node, func(ts *typeState) bool {
		return ts.nonce == string(nonce) && (string(typeURL) == ts.t.URL || (len(typeURL) == 0 && ts.t == st.only))
	})
}

// ackSotwInline is ackDeltaInline for SotW: a plain ACK repeats the
// response's version and the type's latest list of names, which it checks
// by their digest without walking them. It expects the fields in field
// order, as protobuf encoders write them: version (and node), names, type
// URL, nonce; anything else goes to the handler.
func (st *stream) ackSotwInline(raw []byte) bool {
	version, node, rest, ok := sotwAckHead(raw)
	if !ok {
		return false
	}
	return st.ackInline(node, func(ts *typeState) bool {
		if ts.lastVersion != string(version) || !ts.namesKnown {
			return false
		}
		names, ok := trimStringField(rest, sotwReqNonceField, ts.nonce)
		if !ok {
			return false
		}
		if n, ok := trimStringField(names, sotwReqTypeURLField, ts.t.URL); ok {
			names = n
		} else if ts.t != st.only { // only a per-type stream may leave the type out
			return false
		}
		return maphash.Bytes(digestSeed, names) == ts.namesDigest.hash
	})
}

// sotwAckHead reads the fields a SotW request has before its names: the
// version, and the node (which only a stream's first request sets). It
// returns them and the rest of the request; not ok if the node is given
// twice (protobuf merges the two: the handler decodes them all).
func sotwAckHead(raw []byte) (version, node, rest []byte, ok bool) {
	b := raw
	nodes := 0
	for len(b) > 0 && b[0] != namesTag {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || (num != sotwReqVersionField && num != sotwReqNodeField) {
			break // the type URL, if no names come first
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, nil, nil, false
		}
		if num == sotwReqVersionField {
			version = v
		} else if nodes++; nodes > 1 {
			return nil, nil, nil, false
		} else {
			node = v
		}
		b = b[n+m:]
	}
	return version, node, b, version != nil
}

// nodeDecodesLocked reports whether node, a node repeated by a later request,
// decodes, as the handler would decode it, without its extensions (it fails
// the stream otherwise, though it ignores the node). The last node that
// decoded is remembered (seenNode), so a client that repeats its node costs
// a comparison per ACK. Call it with st.mu held.
func (st *stream) nodeDecodesLocked(node []byte) bool {
	if st.repeated.same(node) {
		return true
	}
	if kept, ok := nodeWithoutExtensions(node); !ok || nodeDecoding.Unmarshal(kept, &corev3.Node{}) != nil {
		return false
	}
	st.repeated.remember(node)
	return true
}

// trimStringField returns b without its last field if that field is field
// num holding s, encoded as protobuf encoders do.
func trimStringField(b []byte, num protowire.Number, s string) ([]byte, bool) {
	if len(b) < len(s) || string(b[len(b)-len(s):]) != s {
		return nil, false
	}
	b = b[:len(b)-len(s)]
	var buf [2 * binary.MaxVarintLen64]byte
	head := protowire.AppendVarint(protowire.AppendTag(buf[:0], num, protowire.BytesType), uint64(len(s)))
	if len(b) < len(head) || string(b[len(b)-len(head):]) != string(head) {
		return nil, false
	}
	return b[:len(b)-len(head)], true
}

// ackInline records an ACK of the latest response of the type that acks
// says it answers; it reports whether it did. node is the node the
// request repeats, if any. It never waits for the stream's lock. An ACK
// that lets a held-back response go wakes the stream for a turn, as the
// handler's turn would have pushed it.
func (st *stream) ackInline(node []byte, acks func(*typeState) bool) bool {
	if !st.mu.TryLock() {
		return false
	}
	defer st.mu.Unlock()
	if st.failed != nil || st.closed || st.watcher == nil {
		return false // not started: the first request sets the node
	}
	if node != nil && !st.nodeDecodesLocked(node) {
		return false
	}
	for _, ts := range st.types.list {
		if ts.nonce == "" || !acks(ts) {
			continue
		}
		st.recordReply(ts, ts.lastVersion, "", false)
		if st.held || ts.beatDue {
			st.waker.wake() // a turn sends what was waiting for this ACK
		}
		return true
	}
	return false
}
