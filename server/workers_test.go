package server

import (
	"testing"
	"time"
)

// testTimeout bounds every wait of the package's internal tests.
const testTimeout = 10 * time.Second

// Tasks stuck on clients that do not read delay the others by about
// workStall, not until they are unstuck; once no stream is attached, the
// workers end (goleak checks it for the package).
func TestWorkersStuckTasksDelayNobody(t *testing.T) {
	var p workers
	p.attach()
	release := make(chan struct{})
	for range 3 * 4 * 8 { // more stuck tasks than workers kept on any machine here
		p.submit(func() { <-release })
	}
	ran := make(chan struct{})
	p.submit(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(testTimeout):
		t.Fatal("a task waited behind stuck ones")
	}
	close(release)
	p.detach()
	p.wg.Wait()
	if p.running != 0 || p.idle != 0 {
		t.Errorf("after detach: %d workers running, %d idle", p.running, p.idle)
	}
}

// A stall starts as many workers as tasks wait, up to as many as run, not
// one: each busy worker may be stuck for good, and one worker (or a fixed
// number) per workStall would leave the last of thousands of waiting
// tasks seconds behind.
func TestWorkersStallStartsSeveral(t *testing.T) {
	var p workers
	p.attach()
	release := make(chan struct{})
	p.mu.Lock()
	p.watching = true // no stall check of submit's own: the test makes the first
	p.mu.Unlock()
	for range 4 * p.size { // size busy, the rest waiting
		p.submit(func() { <-release })
	}
	p.mu.Lock()
	seen := p.finished
	p.mu.Unlock()
	p.checkStall(seen)
	p.mu.Lock()
	running, size := p.running, p.size
	p.mu.Unlock()
	if running < 2*size {
		t.Errorf("after one stall: %d workers, want at least %d", running, 2*size)
	}
	p.mu.Lock()
	seen = p.finished
	p.mu.Unlock()
	p.checkStall(seen) // the workers double
	p.mu.Lock()
	running = p.running
	p.mu.Unlock()
	if running < 4*size {
		t.Errorf("after two stalls: %d workers, want at least %d", running, 4*size)
	}
	close(release)
	p.detach()
	p.wg.Wait()
}
