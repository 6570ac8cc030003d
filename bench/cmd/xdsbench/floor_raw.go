package main

import (
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/runtime/protoiface"
	"google.golang.org/protobuf/types/known/emptypb"
)

// rawRequest is a request as it came on the wire: a proto.Message whose
// unmarshalling copies the bytes, so that gRPC's codec hands them over
// without decoding anything.
type rawRequest struct{ b []byte }

// Reset empties r, keeping its buffer.
func (r *rawRequest) Reset() { r.b = r.b[:0] }

// ProtoReflect returns r as a message of no fields with its own Unmarshal.
func (r *rawRequest) ProtoReflect() protoreflect.Message { return rawReflect{emptyReflect, r} }

// rawReflect is the reflection of a rawRequest: that of an empty message,
// except for Interface and ProtoMethods.
type rawReflect struct {
	protoreflect.Message
	r *rawRequest
}

var emptyReflect = (&emptypb.Empty{}).ProtoReflect()

// Interface returns the rawRequest.
func (m rawReflect) Interface() protoreflect.ProtoMessage { return m.r }

// ProtoMethods returns the methods that copy the encoding.
func (m rawReflect) ProtoMethods() *protoiface.Methods { return &rawMethods }

var rawMethods = protoiface.Methods{
	Flags: protoiface.SupportUnmarshalDiscardUnknown,
	Unmarshal: func(in protoiface.UnmarshalInput) (protoiface.UnmarshalOutput, error) {
		r := in.Message.(rawReflect).r
		r.b = append(r.b[:0], in.Buf...)
		return protoiface.UnmarshalOutput{Flags: protoiface.UnmarshalInitialized}, nil
	},
}

// rawPool keeps the receive buffers of streams between requests.
var rawPool = sync.Pool{New: func() any { return new(rawRequest) }}

// recvRaw receives a request on ss in its wire format and passes it to
// handle, which must not keep it.
func recvRaw(ss grpc.ServerStream, handle func([]byte) error) error {
	r := rawPool.Get().(*rawRequest)
	defer rawPool.Put(r)
	if err := ss.RecvMsg(r); err != nil {
		if errors.Is(err, io.EOF) {
			return errEOF
		}
		return err
	}
	return handle(r.b)
}

// errEOF ends a handler without an error: the client closed its side.
var errEOF = errors.New("end of stream")

var errMalformed = errors.New("malformed request")

// fieldScanner goes through the length-delimited fields of an encoded
// message and skips the others.
type fieldScanner struct {
	b   []byte
	err error
}

// next returns the next length-delimited field, or false at the end or on
// malformed input (then err is set).
func (sc *fieldScanner) next() (fieldNum, []byte, bool) {
	for len(sc.b) > 0 {
		num, typ, n := protowire.ConsumeTag(sc.b)
		if n < 0 {
			sc.err = protowire.ParseError(n)
			return 0, nil, false
		}
		sc.b = sc.b[n:]
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(sc.b)
			if n < 0 {
				sc.err = protowire.ParseError(n)
				return 0, nil, false
			}
			sc.b = sc.b[n:]
			return num, v, true
		}
		if n = protowire.ConsumeFieldValue(num, typ, sc.b); n < 0 {
			sc.err = protowire.ParseError(n)
			return 0, nil, false
		}
		sc.b = sc.b[n:]
	}
	return 0, nil, false
}

// skipRun returns how many bytes at the start of b are a run of
// length-delimited fields whose tag is the single byte tag: a list of names
// as encoders write it, measured without looking at each name.
func skipRun(b []byte, tag byte) (int, error) {
	i := 0
	for i < len(b) && b[i] == tag {
		l, n := protowire.ConsumeVarint(b[i+1:])
		if n < 0 || l > uint64(len(b)-i-1-n) {
			return 0, errMalformed
		}
		i += 1 + n + int(l)
	}
	return i, nil
}
