package server

import (
	"testing"
	"time"
)

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
	case <-time.After(10 * time.Second):
		t.Fatal("a task waited behind stuck ones")
	}
	close(release)
	p.detach()
	p.wg.Wait()
	if p.running != 0 || p.idle != 0 {
		t.Errorf("after detach: %d workers running, %d idle", p.running, p.idle)
	}
}
