package server

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xdsd/xdsd/server/internal/xdswire"
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
	ack, nodeField := st.ackSotwInline, protowire.Number(xdswire.SotwReqNodeField)
	if st.delta {
		ack, nodeField = st.ackDeltaInline, xdswire.DeltaReqNodeField
	}
	ts := transportStream(gs)
	if r, ok := ts.(inlineReceiver); ok {
		r.SetInline(ack)
	}
	if s, ok := ts.(shrinker); ok {
		s.SetShrink(func(req []byte) mem.Buffer { return xdswire.ShrinkRequest(req, nodeField) })
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
	typeURL, nonce, node, ok := xdswire.DeltaAck(raw)
	if !ok || len(nonce) == 0 {
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
	version, node, rest, ok := xdswire.SotwAckHead(raw)
	if !ok {
		return false
	}
	return st.ackInline(node, func(ts *typeState) bool {
		if ts.lastVersion != string(version) || !ts.namesKnown {
			return false
		}
		names, ok := xdswire.TrimStringField(rest, xdswire.SotwReqNonceField, ts.nonce)
		if !ok {
			return false
		}
		if n, ok := xdswire.TrimStringField(names, xdswire.SotwReqTypeURLField, ts.t.URL); ok {
			names = n
		} else if ts.t != st.only { // only a per-type stream may leave the type out
			return false
		}
		return xdswire.NamesHash(names) == ts.namesDigest.Hash
	})
}

// nodeDecodesLocked reports whether node, a node repeated by a later request,
// decodes, as the handler would decode it, without its extensions (it fails
// the stream otherwise, though it ignores the node). The last node that
// decoded is remembered (xdswire.SeenNode), so a client that repeats its node costs
// a comparison per ACK. Call it with st.mu held.
func (st *stream) nodeDecodesLocked(node []byte) bool {
	if st.repeated.Same(node) {
		return true
	}
	if kept, ok := xdswire.NodeWithoutExtensions(node); !ok || xdswire.NodeDecoding.Unmarshal(kept, &corev3.Node{}) != nil {
		return false
	}
	st.repeated.Remember(node)
	return true
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
