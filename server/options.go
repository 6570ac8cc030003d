package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// GRPCOptions returns grpc.Server options suited to serving xDS to a large
// fleet of mostly idle clients, one connection each: an 8 KiB read buffer
// per connection (requests are small; grpc-go already shares write buffers
// between flushes), fixed flow-control windows (which also turns off
// grpc-go's bandwidth-probing pings), at most 1,000 streams per connection
// (a client opens a few; a connection holding many more is a client
// gone wrong, holding the server's memory), and keepalive enforcement
// that tolerates clients' pings.
// It also installs Codec, which writes responses from the resources' shared
// encodings instead of marshalling a copy for each stream.
// Pass them to grpc.NewServer along with your own.
func GRPCOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(Codec{}),
		grpc.ReadBufferSize(8 << 10),
		grpc.InitialWindowSize(1 << 20),
		grpc.InitialConnWindowSize(1 << 20),
		grpc.MaxConcurrentStreams(1000),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}
