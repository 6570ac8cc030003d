// Package resource holds what xdsd knows about xDS resource types and
// resources: the registry of v3 type URLs with their per-type rules (the ADS
// order, whether a SotW response carries the full state, wildcard support),
// and Resource, one message encoded once with a content version.
//
// A Resource is immutable after New: its encoded bytes are shared by every
// stream that sends it, and its Version is a hash of the deterministic
// encoding, so the same content has the same version on any replica and
// after any restart.
package resource
