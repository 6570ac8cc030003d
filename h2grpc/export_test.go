package h2grpc

import "time"

// PullOnly makes s read every frame in its read loop, none inside socket
// reads, so that tests can compare the two paths. Call it before Serve.
func PullOnly(s *Server) { s.pullOnly = true }

// SetProbeAckMax sets how long s holds the answer to a client's bandwidth
// probe for frames to go with. Call it before Serve.
func SetProbeAckMax(s *Server, d time.Duration) { s.probeAckMax = d }
