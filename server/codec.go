package server

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// Codec is grpc-go's proto codec, except that it writes xdsd's responses
// from their shared pre-encoded parts instead of marshalling a copy per
// stream. Install it on the gRPC server with grpc.ForceServerCodecV2 (as
// GRPCOptions does); without it responses are marshalled as usual.
type Codec struct{}

var protoCodec = encoding.GetCodecV2(proto.Name)

// Marshal encodes v.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(*xdswire.Response); ok {
		return w.Buffers(), nil
	}
	return protoCodec.Marshal(v)
}

// Unmarshal decodes data into v; a SotW request of an xdsd stream keeps its
// bytes, for the stream to decode; an incremental one is decoded without
// its node, which only a stream's first request decodes
// (xdswire.RequestNode).
// Anything else, such as the requests of other services on the same gRPC
// server, is decoded as the proto codec does.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch r := v.(type) {
	case *xdswire.SotwRequest:
		r.Receive(data)
		return nil
	case *xdswire.DeltaRequest:
		return r.Receive(data)
	}
	return protoCodec.Unmarshal(data, v)
}

// Name is "proto": the content type does not change.
func (Codec) Name() string { return proto.Name }
