package server

import (
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
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

// useFastPaths sets st up to take ACKs inline and send from parts, as far
// as gs's transport allows.
func (st *stream) useFastPaths(gs any, ack func([]byte) bool) {
	ts := transportStream(gs)
	if r, ok := ts.(inlineReceiver); ok {
		r.SetInline(ack)
	}
	if s, ok := ts.(partsSender); ok {
		st.sendParts = s.SendParts
	}
}

// ackDeltaInline takes an incremental request on the connection's reader
// goroutine if it is a plain ACK (a type URL and the nonce of the type's
// latest response, nothing else but the node, which only a stream's first
// request sets): what most requests are once a stream runs. Anything else, or a stream busy in a turn, is left to the handler
// (false).
func (st *stream) ackDeltaInline(raw []byte) bool {
	var typeURL, nonce []byte
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
		default:
			return false
		}
		b = b[n+m:]
	}
	return st.ackInline(typeURL, nonce, nil, nil)
}

// ackSotwInline is ackDeltaInline for SotW: a plain ACK repeats the
// response's version and the type's latest list of names.
func (st *stream) ackSotwInline(raw []byte) bool {
	var version, typeURL, nonce []byte
	plain := true
	d, err := sotwFields(raw, func(_ []byte, num protowire.Number, val []byte) {
		switch num {
		case sotwReqVersionField:
			version = val
		case sotwReqTypeURLField:
			typeURL = val
		case sotwReqNonceField:
			nonce = val
		case sotwReqNodeField:
		default:
			plain = false
		}
	})
	if err != nil || !plain || version == nil {
		return false
	}
	return st.ackInline(typeURL, nonce, version, &d)
}

// ackInline records an ACK of the latest response of the type named
// typeURL, if nonce is that response's and (SotW) version and names are
// those it answered; it reports whether it did. It never waits for the
// stream's lock. An ACK that lets a held-back response go wakes the stream
// for a turn, as the handler's turn would have pushed it.
func (st *stream) ackInline(typeURL, nonce, version []byte, names *namesDigest) bool {
	if len(nonce) == 0 || !st.mu.TryLock() {
		return false
	}
	defer st.mu.Unlock()
	if st.failed != nil || st.closed || st.watcher == nil {
		return false // not started: the first request sets the node
	}
	var ts *typeState
	for t, s := range st.types {
		if string(typeURL) == t.URL || (len(typeURL) == 0 && t == st.only) {
			ts = s
			break
		}
	}
	if ts == nil || ts.nonce != string(nonce) {
		return false
	}
	if names != nil && (!ts.namesKnown || ts.namesDigest != *names || ts.lastVersion != string(version)) {
		return false
	}
	ts.waiting = false
	st.recordReply(ts, ts.lastVersion, "", false)
	if st.held {
		st.waker.wake()
	}
	return true
}
