package h2grpc

import "time"

// PullOnly makes s read every frame in its read loop, none inside socket
// reads, so that tests can compare the two paths. Call it before Serve.
func PullOnly(s *Server) { s.pullOnly = true }

// SetProbeAckMax sets how long s holds the answer to a client's bandwidth
// probe for frames to go with. Call it before Serve.
func SetProbeAckMax(s *Server, d time.Duration) { s.probes.wait = d }

// ProbesListed returns how many connections s's sweep of held probe
// answers has listed.
func ProbesListed(s *Server) int {
	s.probes.mu.Lock()
	defer s.probes.mu.Unlock()
	return len(s.probes.conns)
}

// SweepProbes runs s's sweep of held probe answers now, with wait as the
// least wait.
func SweepProbes(s *Server, wait time.Duration) {
	s.probes.mu.Lock()
	s.probes.wait = wait
	s.probes.mu.Unlock()
	s.probes.sweep()
}
