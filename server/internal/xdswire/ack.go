package xdswire

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
)

// SotwAckHead reads the fields a SotW request has before its names: the
// version, and the node (which only a stream's first request sets). It
// returns them and the rest of the request; not ok if the node is given
// twice (protobuf merges the two: the handler decodes them all).
func SotwAckHead(raw []byte) (version, node, rest []byte, ok bool) {
	b := raw
	nodes := 0
	for len(b) > 0 && b[0] != namesTag {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType || (num != SotwReqVersionField && num != SotwReqNodeField) {
			break // the type URL, if no names come first
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, nil, nil, false
		}
		if num == SotwReqVersionField {
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

// TrimStringField returns b without its last field if that field is field
// num holding s, encoded as protobuf encoders do.
func TrimStringField(b []byte, num protowire.Number, s string) ([]byte, bool) {
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

// DeltaAck returns the type URL, nonce and node of raw, an incremental
// request, if it holds nothing else (the node at most once, since protobuf
// merges repeated nodes): what a plain ACK holds. ok is false for anything
// else.
func DeltaAck(raw []byte) (typeURL, nonce, node []byte, ok bool) {
	nodes := 0
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil, nil, nil, false
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, nil, nil, false
		}
		switch num {
		case DeltaReqTypeURLField:
			typeURL = v
		case DeltaReqNonceField:
			nonce = v
		case DeltaReqNodeField: // Envoy repeats it unless told not to
			if nodes++; nodes > 1 {
				return nil, nil, nil, false
			}
			node = v
		default:
			return nil, nil, nil, false
		}
		b = b[n+m:]
	}
	return typeURL, nonce, node, true
}
