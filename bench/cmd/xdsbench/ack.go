package main

import (
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
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
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, n)
	}
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendString(b, endpointTypeURL)
}

// edsRequest is a SotW EDS request whose names are encoded: streams send it
// with SendMsg, the grpc-go client through ackCodec.
type edsRequest struct {
	version, nonce string
	names          edsNames
}

// size is the length of the request's encoding.
func (r *edsRequest) size() int {
	n := len(r.names)
	if r.version != "" {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(r.version))
	}
	if r.nonce != "" {
		n += protowire.SizeTag(5) + protowire.SizeBytes(len(r.nonce))
	}
	return n
}

// appendTo appends the request's encoding to b, fields in number order as
// proto.Marshal writes them.
func (r *edsRequest) appendTo(b []byte) []byte {
	if r.version != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, r.version)
	}
	b = append(b, r.names...)
	if r.nonce != "" {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendString(b, r.nonce)
	}
	return b
}

// ackCodec is grpc-go's proto codec that also sends an *edsRequest. It
// takes the proto codec's place (and name) in this process, so that the
// requests' content-type stays that of grpc-go's client; the servers this
// process runs (-servers) marshal through it unchanged.
type ackCodec struct{ encoding.CodecV2 }

func init() { encoding.RegisterCodecV2(ackCodec{encoding.GetCodecV2(encproto.Name)}) }

// Marshal encodes an *edsRequest into a buffer from grpc-go's pool (the
// transport writes it after SendMsg returns, then frees it), and anything
// else as the proto codec does.
func (c ackCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*edsRequest)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(r.size())
	*buf = r.appendTo((*buf)[:0])
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}
