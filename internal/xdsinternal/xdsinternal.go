// Package xdsinternal gives xdsd's own packages (server, fileout and their
// tests) what packages cache and resource keep out of their public API, so
// that the godoc of those shows only what an embedder needs.
//
// The logic stays in cache and resource, which hand it over in their init
// functions through package hooks; this package gives it its types once, at
// initialization, so that a call costs a call through a function variable,
// with no type assertion or allocation. The exception is Memo, whose few
// lines are here so that the closures its callers pass do not escape.
package xdsinternal

import (
	"sync"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/xdsinternal/hooks"
	"github.com/xdsd/xdsd/resource"
)

// snapshotMemos returns the map in which a snapshot's users memoize the
// values they derive from it.
var snapshotMemos = hooks.SnapshotMemos.(func(*cache.Snapshot) *sync.Map)

// Memo returns the value memoized in s under key, calling build to make it
// the first time. It lets users of a snapshot share data derived from it
// (it is dropped with the snapshot); build must depend only on the snapshot
// and key, and key must be comparable. Safe for concurrent use: callers
// that race to make the value may each run build, and all get the one value
// kept.
//
// Memo is a function rather than a hook of cache's so that build, called
// here, does not escape: through a function variable, the closures callers
// pass would be allocated at every call.
func Memo(s *cache.Snapshot, key any, build func() any) any {
	m := snapshotMemos(s)
	if v, ok := m.Load(key); ok {
		return v
	}
	v, _ := m.LoadOrStore(key, build())
	return v
}

// GetBytes is (*cache.Snapshot).Get for a name given as bytes (still
// encoded in a request, say), without making a string of it.
var GetBytes = hooks.SnapshotGetBytes.(func(s *cache.Snapshot, t *resource.Type, name []byte) *resource.Resource)

// WatchEncoded is (*cache.Cache).WatchFunc for a node given by its
// protobuf encoding, which must decode (the caller checks it) and which the
// watcher keeps: the caller must not change it. The cache decodes it only
// when a grouping other than the default asks.
var WatchEncoded = hooks.CacheWatchEncoded.(func(c *cache.Cache, node []byte, onChange func()) *cache.Watcher)

// Placeholder returns a bodiless Resource standing for a version a client
// says it holds (delta initial_resource_versions): it compares equal by
// version and hash to the real resource with that name and version.
var Placeholder = hooks.Placeholder.(func(t *resource.Type, name, version string) *resource.Resource)

// SotWField returns r encoded as one entry of a DiscoveryResponse's
// resources field (tag, length and the Any), ready to be concatenated into
// a response. Made once per resource; the bytes must not be modified.
var SotWField = hooks.SotWField.(func(r *resource.Resource) []byte)

// DeltaField returns r encoded as one entry of a DeltaDiscoveryResponse's
// resources field: a Resource with the name, version, body and TTL (no
// aliases). Made once per resource; the bytes must not be modified.
var DeltaField = hooks.DeltaField.(func(r *resource.Resource) []byte)

// SetVersion formats the XOR of resource hashes (resource.Resource.Hash)
// as a version string.
var SetVersion = hooks.SetVersion.(func(xor uint64) string)

// RemovalTypes returns every type in ADS removal order.
var RemovalTypes = hooks.RemovalTypes.(func() []*resource.Type)
