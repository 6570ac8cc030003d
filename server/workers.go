package server

import (
	"runtime"
	"sync"
	"time"
)

// workStall is how long every worker may be busy without finishing a task
// before workers starts one more: a push stuck on a client that does not
// read delays the queued ones by about this much.
const workStall = 5 * time.Millisecond

// workers runs streams' wake-ups on goroutines that live as long as any
// stream is open, so their stacks stay grown to what a push needs: a
// goroutine started for each wake-up would grow its stack anew, a cost
// paid per client on every change. Up to size workers take tasks in
// order; when all are busy and none has finished a task for workStall, more
// start (see checkStall), and leave once idle.
//
// Locking: mu guards every field but wg; cond (on mu) wakes idle workers.
// Workers end when no stream is attached and they are idle; a stream's
// close waits for its own task (see waker), so once every stream is closed
// the workers are ending.
type workers struct {
	mu       sync.Mutex
	cond     sync.Cond
	queue    []func()
	idle     int    // workers waiting in cond
	wakeups  int    // signals sent to idle workers and not yet taken
	running  int    // workers started and not ended
	size     int    // workers kept while streams are open
	finished uint64 // tasks done, to tell a stall
	watching bool   // a stall check is armed
	streams  int    // streams attached
	wg       sync.WaitGroup
}

// attach counts a stream that may submit tasks.
func (p *workers) attach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.size == 0 {
		p.size = 4 * runtime.GOMAXPROCS(0)
		p.cond.L = &p.mu
	}
	p.streams++
}

// detach uncounts a closed stream; with none left, idle workers end.
func (p *workers) detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.streams--
	if p.streams == 0 {
		p.cond.Broadcast()
	}
}

// submit runs fn on a worker. It never blocks.
func (p *workers) submit(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, fn)
	switch {
	case p.idle > p.wakeups:
		p.wakeups++
		p.cond.Signal()
	case p.running < p.size:
		p.startLocked()
	case !p.watching:
		p.watching = true
		seen := p.finished
		time.AfterFunc(workStall, func() { p.checkStall(seen) })
	}
}

// checkStall starts workers if tasks wait and none finished since seen:
// as many as wait, up to as many as run (at least size), so that the
// workers double at each stall. Each busy worker may be stuck on a client
// for good (a send waiting for window the client never gives), and
// thousands of such streams, woken by one publication, would otherwise
// hold the tasks behind them for thousands of stalls.
func (p *workers) checkStall(seen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.watching = false
		return
	}
	if p.finished == seen && p.idle == p.wakeups {
		for range min(len(p.queue), max(p.size, p.running)) {
			p.startLocked()
		}
	}
	seen = p.finished
	time.AfterFunc(workStall, func() { p.checkStall(seen) })
}

func (p *workers) startLocked() {
	p.running++
	p.wg.Add(1)
	go p.work()
}

// work takes tasks until there are none and no stream is attached, or
// more workers than size are idle.
func (p *workers) work() {
	defer p.wg.Done()
	p.mu.Lock()
	for {
		for len(p.queue) == 0 {
			if p.streams == 0 || p.running > p.size {
				p.running--
				p.mu.Unlock()
				return
			}
			p.idle++
			p.cond.Wait()
			p.idle--
			if p.wakeups > 0 {
				p.wakeups--
			}
		}
		fn := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		if len(p.queue) == 0 {
			p.queue = p.queue[:0:0] // let the backing array go
		}
		p.mu.Unlock()
		fn()
		p.mu.Lock()
		p.finished++
	}
}
