// Package client is an xDS client library: it watches resources on an xDS
// management server over ADS or per-type streams, state of the world (SotW)
// or incremental (delta), and tells a Watcher about updates, errors and
// resources that do not exist. It implements the client requirements C1 to
// C8 of xdsd's protocol specification (PROTOCOL.md, the numbered list of
// xDS requirements the project tests against):
//
//   - C1: every response is ACKed or NACKed; Config.Validate decides, and a
//     rejected response leaves the last valid resources in force.
//   - C2: a response naming a resource twice is NACKed.
//   - C3: in SotW, a Listener or Cluster missing from a response is deleted;
//     for other types, missing means nothing. Deleting a Listener or Cluster
//     drops the RouteConfigurations or ClusterLoadAssignment it referred to
//     (unless another Listener or Cluster still refers to them), as Envoy
//     does: they leave the subscription, and responses still carrying them
//     are ignored, until a Listener or Cluster refers to them again; then
//     they are requested again (a wildcard over SotW cannot be).
//   - C4: a watched resource not received within Config.WatchExpiry is
//     reported as not existing; it may still arrive later.
//   - C5: streams reconnect with backoff; SotW resumes with the versions
//     seen, delta with initial_resource_versions and every name watched.
//   - C6: a resource with a TTL is deleted when neither an update nor a
//     heartbeat refreshes it in time.
//   - C7: with Config.File, the client watches a file holding a
//     DiscoveryResponse in any of fileout's four encodings instead of a
//     server, and keeps the last valid content.
//   - C8: with Config.REST, the client long-polls a REST-JSON server
//     (package resttransport) instead of opening gRPC streams.
//
// The client core does not speak gRPC itself: it sends and receives encoded
// messages through a transport.Transport (see package transport); package
// grpctransport is the gRPC implementation and the default.
//
// # Concurrency
//
// Each stream's protocol state (subscriptions, versions, nonces, received
// resources, timers) is owned by one goroutine. Watcher callbacks run one
// at a time, in order, on a single goroutine of the Client, never under a
// lock; a callback may call Watch and cancel functions, but not Close.
package client
