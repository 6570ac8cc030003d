package main

import (
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// edsNames holds a SotW client's EDS subscription encoded once: the
// resource_names and type_url fields of a DiscoveryRequest. A client ACKs
// every EDS response with the same names, which with 1,000 clusters are
// 30 KB that proto.Marshal would encode (and check as UTF-8) again on every
// ACK: the load tool's largest cost, taken from the CPU it shares with the
// server. The bytes on the wire stay those proto.Marshal writes.
type edsNames []byte

// encodeEDSNames encodes names and the EDS type URL.
func encodeEDSNames(names []string) edsNames {
	var b []byte
	for _, n := range names {
		b = protowire.AppendTag(b, sotwNamesField, protowire.BytesType)
		b = protowire.AppendString(b, n)
	}
	return appendField(b, sotwTypeURLField, endpointTypeURL)
}

// encodedRequest is a request the client encodes itself, as proto.Marshal
// would: streams send it with SendMsg, the grpc-go client through
// ackCodec.
type encodedRequest interface {
	size() int                // the length of the encoding
	appendTo(b []byte) []byte // appends the encoding to b
}

// edsRequest is a SotW EDS request whose names are encoded, and whose node,
// if set, is too (a client repeating its node: -repeat-node).
type edsRequest struct {
	version, nonce string
	node           []byte // an encoded Node, or nil
	names          edsNames
}

func (r *edsRequest) size() int {
	return len(r.names) + fieldSize(sotwVersionField, r.version) + fieldSize(sotwNodeField, r.node) +
		fieldSize(sotwNonceField, r.nonce)
}

func (r *edsRequest) appendTo(b []byte) []byte {
	b = appendField(b, sotwVersionField, r.version)
	b = appendField(b, sotwNodeField, r.node)
	b = append(b, r.names...)
	return appendField(b, sotwNonceField, r.nonce)
}

// deltaACK is an incremental ACK, with an encoded node if set.
type deltaACK struct {
	node           []byte // an encoded Node, or nil
	typeURL, nonce string
}

func (r *deltaACK) size() int {
	return fieldSize(deltaNodeField, r.node) + fieldSize(deltaTypeURL, r.typeURL) + fieldSize(deltaNonceField, r.nonce)
}

func (r *deltaACK) appendTo(b []byte) []byte {
	b = appendField(b, deltaNodeField, r.node)
	b = appendField(b, deltaTypeURL, r.typeURL)
	return appendField(b, deltaNonceField, r.nonce)
}

// appendField appends field num holding v, unless v is empty, as
// proto.Marshal leaves an unset string out (a node, when set, is never
// empty); fieldSize is the length it appends.
func appendField[T ~string | ~[]byte](b []byte, num protowire.Number, v T) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(len(v)))
	return append(b, v...)
}

func fieldSize[T ~string | ~[]byte](num protowire.Number, v T) int {
	if len(v) == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(v))
}

// ackCodec is grpc-go's proto codec that also sends an encodedRequest. It
// takes the proto codec's place (and name) in this process, so that the
// requests' content-type stays that of grpc-go's client. The servers this
// binary runs (-servers) force xdsd's codec (server.GRPCOptions), not this.
type ackCodec struct{ encoding.CodecV2 }

// marshalRequest encodes the requests clients do not encode themselves.
var marshalRequest = proto.MarshalOptions{Deterministic: true}

func init() { encoding.RegisterCodecV2(ackCodec{encoding.GetCodecV2(encproto.Name)}) }

// Marshal encodes an encodedRequest into a buffer from grpc-go's pool (the
// transport writes it after SendMsg returns, then frees it), another
// message deterministically (a node's metadata map is written in the same
// order every time, as an Envoy repeats its node's bytes), and anything
// else as the proto codec does.
func (c ackCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(proto.Message); ok {
		b, err := marshalRequest.Marshal(m)
		return mem.BufferSlice{mem.SliceBuffer(b)}, err
	}
	r, ok := v.(encodedRequest)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(r.size())
	*buf = r.appendTo((*buf)[:0])
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}
