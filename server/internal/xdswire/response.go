package xdswire

import (
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Response is a response assembled from pre-encoded parts: a small
// per-stream header and resource entries whose bytes every stream shares.
// With the server's Codec installed gRPC writes the parts as they
// are; with any other codec it is marshalled through ProtoReflect, from the
// equivalent message.
type Response struct {
	header []byte   // version, type URL, nonce, removed names
	parts  [][]byte // pre-encoded resources entries
	msg    proto.Message
	// complete fills msg's resources, which only other codecs need; nil
	// once done.
	complete func()
}

// ProtoReflect makes a Response a proto.Message for codecs other than
// ours: it reflects the equivalent generated message.
func (w *Response) ProtoReflect() protoreflect.Message {
	if w.complete != nil {
		w.complete()
		w.complete = nil
	}
	return w.msg.ProtoReflect()
}

// Message returns the response as the generated message it encodes, its
// resources filled in.
func (w *Response) Message() proto.Message {
	w.ProtoReflect()
	return w.msg
}

// Buffers returns the response's encoding: its header, then its parts.
func (w *Response) Buffers() mem.BufferSlice {
	bs := make(mem.BufferSlice, 0, 1+len(w.parts))
	bs = append(bs, mem.SliceBuffer(w.header))
	for _, p := range w.parts {
		bs = append(bs, mem.SliceBuffer(p))
	}
	return bs
}

// SotwResponse assembles a SotW response around pre-encoded resource entries;
// resp is the same response as a message, whose resources complete fills
// if it is ever needed.
func SotwResponse(resp *discovery.DiscoveryResponse, cp []byte, parts [][]byte, complete func()) *Response {
	h := AppendSotwHeader(nil, resp.VersionInfo, resp.TypeUrl, resp.Nonce, cp)
	return &Response{header: h, parts: parts, msg: resp, complete: complete}
}

// AppendSotwHeader appends the fields of a SotW response but its
// resources; cp is its encoded control_plane field, if any.
func AppendSotwHeader(b []byte, version, typeURL, nonce string, cp []byte) []byte {
	b = AppendString(b, sotwVersionField, version)
	b = AppendString(b, sotwTypeURLField, typeURL)
	b = AppendString(b, sotwNonceField, nonce)
	return append(b, cp...)
}

// DeltaResponse assembles an incremental response: parts are the encoded
// entries of the resources that complete puts in resp, in the same order.
func DeltaResponse(resp *discovery.DeltaDiscoveryResponse, cp []byte, parts [][]byte, complete func()) *Response {
	h := AppendDeltaHeader(nil, resp.SystemVersionInfo, resp.TypeUrl, resp.Nonce, resp.RemovedResources, cp)
	return &Response{header: h, parts: parts, msg: resp, complete: complete}
}

// AppendDeltaHeader appends the fields of an incremental response but its
// resources; cp is its encoded control_plane field, if any.
func AppendDeltaHeader(b []byte, version, typeURL, nonce string, removed []string, cp []byte) []byte {
	b = AppendString(b, deltaVersionField, version)
	b = AppendString(b, deltaTypeURLField, typeURL)
	b = AppendString(b, deltaNonceField, nonce)
	for _, n := range removed {
		b = protowire.AppendTag(b, deltaRemovedField, protowire.BytesType)
		b = protowire.AppendString(b, n)
	}
	return append(b, cp...)
}

// Parts is what a response sent from parts (a transport's SendParts) is
// assembled in: its header and its list of parts. Both are reused, from
// parts scratches, since the transport copies them before SendParts
// returns.
type Parts struct {
	header []byte
	parts  [][]byte
}

var partsScratches = sync.Pool{New: func() any { return new(Parts) }}

// GetParts returns a scratch whose parts hold the header that
// appendHeader writes, ready for the resources' parts.
func GetParts(appendHeader func([]byte) []byte) *Parts {
	sc := partsScratches.Get().(*Parts)
	sc.header = appendHeader(sc.header[:0])
	sc.parts = append(sc.parts[:0], sc.header)
	return sc
}

// Add appends p to the parts.
func (sc *Parts) Add(p []byte) { sc.parts = append(sc.parts, p) }

// Send sends the parts with send and gives the scratch back.
func (sc *Parts) Send(send func([][]byte) error) error {
	err := send(sc.parts)
	clear(sc.parts) // no references into resources kept while pooled
	if cap(sc.header) <= 4<<10 && cap(sc.parts) <= 1<<10 {
		partsScratches.Put(sc)
	}
	return err
}

// Entry encodes m as one entry of a response's resources field, for the
// parts that are particular to a stream (TTL wrappers, aliases, notices).
func Entry(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic("server: encoding a response Entry: " + err.Error()) // built from valid messages
	}
	out := protowire.AppendTag(make([]byte, 0, len(b)+8), 2, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(len(b)))
	return append(out, b...)
}

// AppendString appends field num holding s, unless s is empty (as
// protobuf encoders leave it out).
func AppendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
