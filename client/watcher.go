package client

import (
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
)

// Watcher receives what happens to watched resources. Its methods are
// called one at a time on the Client's callback goroutine.
type Watcher interface {
	// OnUpdate is called with a new or changed resource.
	OnUpdate(Update)
	// OnError is called when a response for the watched resources is
	// rejected (the last valid resource stays in force) or the stream to
	// the server fails. The watch stays in place.
	OnError(error)
	// OnDoesNotExist is called when the resource name is deleted, expires
	// (TTL), is dropped with the Listener or Cluster that referred to it,
	// or is not received within the watch expiry. A later update may
	// follow: a dropped resource is fetched again when a Listener or
	// Cluster refers to it again.
	OnDoesNotExist(name string)
}

// Update is one accepted resource.
type Update struct {
	// TypeURL is the resource's type.
	TypeURL string
	// Name is the resource's name.
	Name string
	// Version is the version the server gave: the response's version_info
	// in SotW, the resource's own version in delta.
	Version string
	// Message is the decoded resource. It is shared by every watcher and
	// must not be modified.
	Message proto.Message
	// TTL is the resource's time to live, zero if it has none.
	TTL time.Duration
}

// watch is one Watch call. It is created by Watch and then read-only,
// except canceled, which is set once by the cancel function.
type watch struct {
	typeURL string
	name    string // "*" for a wildcard watch
	w       Watcher
	ser     *serializer

	canceled atomic.Bool
}

func (w *watch) update(u Update) {
	w.ser.schedule(func() {
		if !w.canceled.Load() {
			w.w.OnUpdate(u)
		}
	})
}

func (w *watch) error(err error) {
	w.ser.schedule(func() {
		if !w.canceled.Load() {
			w.w.OnError(err)
		}
	})
}

func (w *watch) doesNotExist(name string) {
	w.ser.schedule(func() {
		if !w.canceled.Load() {
			w.w.OnDoesNotExist(name)
		}
	})
}
