// Package grpctransport is the gRPC implementation of the xDS client's
// transport boundary (package transport): streams of encoded xDS messages
// on a grpc.ClientConn.
package grpctransport

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/client/transport"
)

// Builder builds gRPC transports. Its zero value has no dial options, so
// grpc.NewClient fails for want of transport credentials: pass
// grpc.WithTransportCredentials (insecure.NewCredentials() for plaintext).
type Builder struct {
	// DialOptions are passed to grpc.NewClient.
	DialOptions []grpc.DialOption
}

var (
	_ transport.Builder   = Builder{}
	_ transport.Transport = (*grpcTransport)(nil)
	_ transport.Stream    = stream{}
)

// Build returns a transport on a new grpc.ClientConn to server. The
// connection is made lazily, on the first stream.
func (b Builder) Build(server string) (transport.Transport, error) {
	cc, err := grpc.NewClient(server, b.DialOptions...)
	if err != nil {
		return nil, fmt.Errorf("grpctransport: dial %s: %w", server, err)
	}
	return &grpcTransport{cc: cc}, nil
}

// grpcTransport is a transport.Transport on one ClientConn. It holds no
// mutable state of its own.
type grpcTransport struct {
	cc *grpc.ClientConn
}

var streamDesc = &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}

// NewStream opens a stream for method on the ClientConn.
func (t *grpcTransport) NewStream(ctx context.Context, method string) (transport.Stream, error) {
	s, err := t.cc.NewStream(ctx, streamDesc, method, grpc.ForceCodec(byteCodec{}))
	if err != nil {
		return nil, err
	}
	return stream{s}, nil
}

// Close closes the ClientConn.
func (t *grpcTransport) Close() error { return t.cc.Close() }

// stream adapts a grpc.ClientStream to transport.Stream.
type stream struct{ s grpc.ClientStream }

func (s stream) Send(msg []byte) error { return s.s.SendMsg(msg) }

func (s stream) Recv() ([]byte, error) {
	var b []byte
	if err := s.s.RecvMsg(&b); err != nil {
		return nil, err
	}
	return b, nil
}

// byteCodec passes already encoded protobuf messages through. Its name is
// empty so the content type stays "application/grpc", as servers expect
// for protobuf.
type byteCodec struct{}

func (byteCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return b, nil
	}
	return nil, fmt.Errorf("grpctransport: message is %T, want []byte", v)
}

func (byteCodec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		// grpc hands the codec a copy it does not reuse (Materialize).
		*b = data
		return nil
	}
	return fmt.Errorf("grpctransport: target is %T, want *[]byte", v)
}

func (byteCodec) Name() string { return "" }
