package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// GRPCOptions returns grpc.Server options suited to serving xDS to a large
// fleet of mostly idle clients, one connection each: per-connection buffers
// sized for small requests (a write buffer shared between flushes rather
// than 32 KiB held per connection, an 8 KiB read buffer), no practical
// limit on streams per connection, and keepalive enforcement that tolerates
// clients' pings. Pass them to grpc.NewServer along with your own.
func GRPCOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.SharedWriteBuffer(true),
		grpc.ReadBufferSize(8 << 10),
		grpc.MaxConcurrentStreams(1 << 20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}
