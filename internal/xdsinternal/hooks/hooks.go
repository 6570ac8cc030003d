// Package hooks holds the slots through which packages cache and resource
// hand xdsd's own packages what they keep out of their public API. Each
// package sets its slots in an init function; read them through package
// xdsinternal, which gives them their types.
//
// The slots are untyped because their types name cache's and resource's
// types, and this package, which cache and resource import, cannot import
// them back. Each slot's comment gives the type it holds.
package hooks

// Slots set by package cache.
var (
	// SnapshotMemos holds func(*cache.Snapshot) *sync.Map: the map of the
	// values memoized in a snapshot.
	SnapshotMemos any
	// SnapshotGetBytes holds func(*cache.Snapshot, *resource.Type, []byte) *resource.Resource.
	SnapshotGetBytes any
	// CacheWatchEncoded holds func(*cache.Cache, []byte, func()) *cache.Watcher.
	CacheWatchEncoded any
)

// Slots set by package resource.
var (
	// Placeholder holds func(*resource.Type, string, string) *resource.Resource.
	Placeholder any
	// SotWField holds func(*resource.Resource) []byte.
	SotWField any
	// DeltaField holds func(*resource.Resource) []byte.
	DeltaField any
	// SetVersion holds func(uint64) string.
	SetVersion any
	// RemovalTypes holds func() []*resource.Type.
	RemovalTypes any
)
