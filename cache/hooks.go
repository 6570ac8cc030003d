package cache

import "github.com/xdsd/xdsd/internal/xdsinternal/hooks"

// init hands xdsd's own packages, through package xdsinternal, what the
// cache keeps out of its API.
func init() {
	hooks.SnapshotMemos = (*Snapshot).memos
	hooks.SnapshotGetBytes = (*Snapshot).getBytes
	hooks.CacheWatchEncoded = (*Cache).watchEncoded
}
