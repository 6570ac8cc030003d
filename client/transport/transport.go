// Package transport is the boundary between the xDS client and the wire.
// The client core speaks xDS through these three interfaces only; the
// gRPC implementation lives in package grpctransport, and tests fake this
// boundary and nothing else.
//
// Messages cross the boundary encoded: a Stream carries the bytes of
// DiscoveryRequest/DiscoveryResponse or DeltaDiscoveryRequest/
// DeltaDiscoveryResponse messages, as the method of the stream says.
package transport

import "context"

// Builder creates a Transport to one management server.
type Builder interface {
	// Build returns a Transport to server (for gRPC, a target such as
	// "localhost:18000" or "dns:///xds.example.com:443").
	Build(server string) (Transport, error)
}

// Transport opens streams to one management server.
type Transport interface {
	// NewStream opens a bidirectional stream for method, a full gRPC
	// method name such as
	// "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources".
	// The stream ends when ctx is cancelled.
	NewStream(ctx context.Context, method string) (Stream, error)
	// Close releases the transport. Streams must have ended first.
	Close() error
}

// Stream is one bidirectional xDS stream. Send and Recv may be called
// concurrently with each other, but neither concurrently with itself.
type Stream interface {
	// Send sends one encoded request.
	Send(msg []byte) error
	// Recv blocks until the next encoded response arrives or the stream
	// ends, when it returns an error.
	Recv() ([]byte, error)
}
