package client

import (
	"context"
	"sync"
)

// serializer runs callbacks one at a time, in the order scheduled, on its
// own goroutine, never under a lock. It is started by newSerializer and
// stopped by cancelling the context given to it; callbacks still queued
// then are dropped.
type serializer struct {
	// Read-only after newSerializer.
	kick chan struct{} // capacity 1: wakes run
	done chan struct{} // closed when run returns

	mu    sync.Mutex // guards queue
	queue []func()
}

func newSerializer(ctx context.Context) *serializer {
	s := &serializer{kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// schedule queues f. It never blocks.
func (s *serializer) schedule(f func()) {
	s.mu.Lock()
	s.queue = append(s.queue, f)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *serializer) run(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		for {
			s.mu.Lock()
			batch := s.queue
			s.queue = nil
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, f := range batch {
				if ctx.Err() != nil {
					return
				}
				f()
			}
		}
	}
}
