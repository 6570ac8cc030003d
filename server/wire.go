package server

import (
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	gproto "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Field numbers of DiscoveryResponse and DeltaDiscoveryResponse written by
// hand (the resources field, 2, comes pre-encoded from each Resource).
const (
	sotwVersionField  = 1 // version_info
	sotwTypeURLField  = 4 // type_url
	sotwNonceField    = 5 // nonce
	deltaVersionField = 1 // system_version_info
	deltaTypeURLField = 4 // type_url
	deltaNonceField   = 5 // nonce
	deltaRemovedField = 6 // removed_resources
)

// wireResponse is a response assembled from pre-encoded parts: a small
// per-stream header and resource entries whose bytes every stream shares.
// With the Codec installed (see GRPCOptions) gRPC writes the parts as they
// are; with any other codec it is marshalled through ProtoReflect, from the
// equivalent message.
type wireResponse struct {
	header []byte   // version, type URL, nonce, removed names
	parts  [][]byte // pre-encoded resources entries
	msg    gproto.Message
	// complete fills msg's resources, which only other codecs need; nil
	// once done.
	complete func()
}

// ProtoReflect makes a wireResponse a proto.Message for codecs other than
// ours: it reflects the equivalent generated message.
func (w *wireResponse) ProtoReflect() protoreflect.Message {
	if w.complete != nil {
		w.complete()
		w.complete = nil
	}
	return w.msg.ProtoReflect()
}

func (w *wireResponse) buffers() mem.BufferSlice {
	bs := make(mem.BufferSlice, 0, 1+len(w.parts))
	bs = append(bs, mem.SliceBuffer(w.header))
	for _, p := range w.parts {
		bs = append(bs, mem.SliceBuffer(p))
	}
	return bs
}

// sotwWire assembles a SotW response around pre-encoded resource entries;
// resp is the same response as a message, whose resources complete fills
// if it is ever needed.
func sotwWire(resp *discovery.DiscoveryResponse, cp []byte, parts [][]byte, complete func()) *wireResponse {
	h := appendSotwHeader(nil, resp.VersionInfo, resp.TypeUrl, resp.Nonce, cp)
	return &wireResponse{header: h, parts: parts, msg: resp, complete: complete}
}

// appendSotwHeader appends the fields of a SotW response but its
// resources; cp is its encoded control_plane field, if any.
func appendSotwHeader(b []byte, version, typeURL, nonce string, cp []byte) []byte {
	b = appendString(b, sotwVersionField, version)
	b = appendString(b, sotwTypeURLField, typeURL)
	b = appendString(b, sotwNonceField, nonce)
	return append(b, cp...)
}

// deltaWire assembles an incremental response: parts are the encoded
// entries of the resources that complete puts in resp, in the same order.
func deltaWire(resp *discovery.DeltaDiscoveryResponse, cp []byte, parts [][]byte, complete func()) *wireResponse {
	h := appendDeltaHeader(nil, resp.SystemVersionInfo, resp.TypeUrl, resp.Nonce, resp.RemovedResources, cp)
	return &wireResponse{header: h, parts: parts, msg: resp, complete: complete}
}

// appendDeltaHeader appends the fields of an incremental response but its
// resources; cp is its encoded control_plane field, if any.
func appendDeltaHeader(b []byte, version, typeURL, nonce string, removed []string, cp []byte) []byte {
	b = appendString(b, deltaVersionField, version)
	b = appendString(b, deltaTypeURLField, typeURL)
	b = appendString(b, deltaNonceField, nonce)
	for _, n := range removed {
		b = protowire.AppendTag(b, deltaRemovedField, protowire.BytesType)
		b = protowire.AppendString(b, n)
	}
	return append(b, cp...)
}

// partsScratch is what a response sent from parts (stream.sendParts) is
// assembled in: its header and its list of parts. Both are reused, from
// partsScratches, since the transport copies them before SendParts
// returns.
type partsScratch struct {
	header []byte
	parts  [][]byte
}

var partsScratches = sync.Pool{New: func() any { return new(partsScratch) }}

// getParts returns a scratch whose parts hold the header that
// appendHeader writes, ready for the resources' parts.
func getParts(appendHeader func([]byte) []byte) *partsScratch {
	sc := partsScratches.Get().(*partsScratch)
	sc.header = appendHeader(sc.header[:0])
	sc.parts = append(sc.parts[:0], sc.header)
	return sc
}

// send sends the parts with send and gives the scratch back.
func (sc *partsScratch) send(send func([][]byte) error) error {
	err := send(sc.parts)
	clear(sc.parts) // no references into resources kept while pooled
	if cap(sc.header) <= 4<<10 && cap(sc.parts) <= 1<<10 {
		partsScratches.Put(sc)
	}
	return err
}

// entry encodes m as one entry of a response's resources field, for the
// parts that are particular to a stream (TTL wrappers, aliases, notices).
func entry(m gproto.Message) []byte {
	b, err := gproto.Marshal(m)
	if err != nil {
		panic("server: encoding a response entry: " + err.Error()) // built from valid messages
	}
	out := protowire.AppendTag(make([]byte, 0, len(b)+8), 2, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(len(b)))
	return append(out, b...)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// Codec is grpc-go's proto codec, except that it writes xdsd's responses
// from their shared pre-encoded parts instead of marshalling a copy per
// stream. Install it on the gRPC server with grpc.ForceServerCodecV2 (as
// GRPCOptions does); without it responses are marshalled as usual.
type Codec struct{}

var protoCodec = encoding.GetCodecV2(proto.Name)

// Marshal encodes v.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(*wireResponse); ok {
		return w.buffers(), nil
	}
	return protoCodec.Marshal(v)
}

// Unmarshal decodes data into v; a SotW request of an xdsd stream keeps its
// bytes, for the stream to decode; an incremental one is decoded without
// its node, which only a stream's first request decodes (requestNode).
// Anything else, such as the requests of other services on the same gRPC
// server, is decoded as the proto codec does.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch r := v.(type) {
	case *sotwRequest:
		r.buf = data.MaterializeToBuffer(mem.DefaultBufferPool()) // no copy if in one piece
		r.raw = r.buf.ReadOnlyData()
		return nil
	case *deltaRequest:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return r.decode(buf.ReadOnlyData())
	}
	return protoCodec.Unmarshal(data, v)
}

// Name is "proto": the content type does not change.
func (Codec) Name() string { return proto.Name }
