package server

import "sync"

// waker runs a stream's wake-ups (a new snapshot, the warm gate's timeout,
// heartbeats falling due) on the server's workers, so that an idle stream
// has no goroutine of its own besides its handler, which blocks in Recv. Wake-ups that arrive while one is running coalesce into one more
// run. The stream owns it: close stops it and waits for the running
// goroutine, if any.
type waker struct {
	fn   func()   // the work; set before the first wake, runs on one goroutine at a time
	pool *workers // runs fn; set before the first wake
	task func()   // loop, as submitted to pool: made once
	wg   sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	running bool       // a goroutine is running fn, or about to
	again   bool       // wake was called while it ran
	closed  bool
}

// wake asks for fn to run. It never blocks: it may be called from the
// cache's publication path and from timers.
func (w *waker) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
	case w.running:
		w.again = true
	default:
		w.running = true
		w.wg.Add(1)
		if w.task == nil {
			w.task = w.loop
		}
		w.pool.submit(w.task)
	}
}

func (w *waker) loop() {
	defer w.wg.Done()
	for {
		w.fn()
		w.mu.Lock()
		if !w.again || w.closed {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.again = false
		w.mu.Unlock()
	}
}

// close stops further wake-ups and waits for a running one to end.
func (w *waker) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.wg.Wait()
}
