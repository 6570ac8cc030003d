package etcdstore

import (
	"context"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil/poll"
)

// idle reports whether p has nothing queued or being parsed.
func (p *preparer) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) == 0 && len(p.inFlight) == 0
}

// TestPreparerForgets: a file deleted, or put again, before its parse is
// done keeps nothing of it; what take does not return is not held.
func TestPreparerForgets(t *testing.T) {
	p := newPreparer()
	file := []byte("resources: []\n")
	p.put("g", "deleted.yaml", file)
	p.remove("g", "deleted.yaml")
	p.put("g", "twice.yaml", file)
	p.put("g", "twice.yaml", file)
	p.put("g", "not-a-config-file.txt", file)
	p.put("h", "taken.yaml", file)
	if files := p.take("h"); len(files) != 0 {
		t.Errorf("take returned %d files before any was parsed", len(files))
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 10*time.Second, "the queue parsed", p.idle)

	files := p.take("g")
	if len(files) != 1 || files["twice.yaml"] == nil {
		t.Errorf("generation g parsed ahead: %v, want twice.yaml alone", files)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.done) != 0 || len(p.latest) != 0 {
		t.Errorf("held after take: %d generations parsed, %d puts pending", len(p.done), len(p.latest))
	}
}
