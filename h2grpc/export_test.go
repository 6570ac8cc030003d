package h2grpc

// PullOnly makes s read every frame in its read loop, none inside socket
// reads, so that tests can compare the two paths. Call it before Serve.
func PullOnly(s *Server) { s.pullOnly = true }
