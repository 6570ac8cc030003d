package etcdstore

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"github.com/xdsd/xdsd/internal/testutil/poll"
	"github.com/xdsd/xdsd/source/configdir"
)

// idle reports whether p has nothing queued or being parsed.
func (p *preparer) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) == 0 && len(p.inFlight) == 0
}

// TestPreparerForgets: a file deleted, or put again, before its parse is
// done keeps nothing of the earlier bytes; take returns its generation's
// files and forgets every generation's.
func TestPreparerForgets(t *testing.T) {
	p := newPreparer()
	v1, v2 := []byte("resources: []\n"), []byte("resources: []\n# the second\n")
	p.put("g", "deleted.yaml", v1)
	p.remove("g", "deleted.yaml")
	p.put("g", "twice.yaml", v1)
	p.put("g", "twice.yaml", v2)
	p.put("g", "not-a-config-file.txt", v1)
	p.put("other", "other.yaml", v1)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 10*time.Second, "the queue parsed", p.idle)

	files := p.take("g")
	if len(files) != 1 || files["twice.yaml"] == nil {
		t.Fatalf("generation g parsed ahead: %v, want twice.yaml alone", files)
	}
	// What was kept of twice.yaml is the parse of the bytes it was put
	// with last: a loader that finds them takes it.
	l := configdir.NewFSLoader(fstest.MapFS{"twice.yaml": {Data: v2}}, "files")
	l.Offer("twice.yaml", files["twice.yaml"])
	res, err := l.Load()
	if err != nil {
		t.Fatal(err)
	}
	if res.Prepared != 1 {
		t.Errorf("a load of twice.yaml as put last took %d files parsed ahead, want 1", res.Prepared)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.done) != 0 || len(p.latest) != 0 {
		t.Errorf("held after take: %d generations parsed, %d puts pending", len(p.done), len(p.latest))
	}
}
