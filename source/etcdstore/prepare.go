package etcdstore

import (
	"context"
	"io/fs"
	"runtime"
	"sync"

	"github.com/xdsd/xdsd/source/configdir"
)

// preparer parses the files of the generations being written as the
// replica's watch delivers them, so that the switch to one finds most of
// its files parsed (configdir.Prepare): parsing is nearly all of a load's
// cost, and a large apply writes its files for a while before it
// switches. The files whose bytes are those in force are left out (the
// loader keeps what it parsed of them). The switch reads the generation
// whole all the same, and the loader takes a file parsed ahead only if it
// holds the bytes that were parsed.
//
// Locking: mu guards every field; cond (on mu) is signalled when a job is
// queued, when one is done, and when the workers are to stop.
type preparer struct {
	mu       sync.Mutex
	cond     *sync.Cond
	queue    []prepareJob
	inFlight map[string]int                            // by generation: jobs being parsed
	done     map[string]map[string]*configdir.Prepared // by generation, then path
	stopped  bool
}

// prepareJob is a file of a generation being written.
type prepareJob struct {
	gen, path string
	data      []byte
}

func newPreparer() *preparer {
	p := &preparer{inFlight: map[string]int{}, done: map[string]map[string]*configdir.Prepared{}}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// run parses the queued files on as many workers as there are cores
// until ctx ends.
func (p *preparer) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(p.work)
	}
	<-ctx.Done()
	p.mu.Lock()
	p.stopped = true
	p.cond.Broadcast()
	p.mu.Unlock()
	wg.Wait()
}

// work parses queued files until the preparer stops.
func (p *preparer) work() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.queue) == 0 && !p.stopped {
			p.cond.Wait()
		}
		if p.stopped {
			return
		}
		j := p.queue[0]
		p.queue[0] = prepareJob{}
		p.queue = p.queue[1:]
		p.inFlight[j.gen]++
		p.mu.Unlock()
		parsed := configdir.Prepare(j.path, j.data)
		p.mu.Lock()
		if p.inFlight[j.gen]--; p.inFlight[j.gen] == 0 {
			delete(p.inFlight, j.gen)
		}
		if files := p.done[j.gen]; files != nil {
			files[j.path] = parsed
		}
		p.cond.Broadcast()
	}
}

// put queues the file at path of generation gen, which is being written,
// to be parsed; a path that is no configuration file's is not.
func (p *preparer) put(gen, path string, data []byte) {
	if !fs.ValidPath(path) || !configdir.IsConfigFile(path) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done[gen] == nil {
		p.done[gen] = map[string]*configdir.Prepared{}
	}
	delete(p.done[gen], path) // parsed from bytes no longer there
	p.queue = append(p.queue, prepareJob{gen, path, data})
	p.cond.Signal()
}

// remove forgets the file at path of generation gen, deleted.
func (p *preparer) remove(gen, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if files := p.done[gen]; files != nil {
		delete(files, path)
		if len(files) == 0 && p.inFlight[gen] == 0 {
			delete(p.done, gen) // a job of gen still queued is then dropped when done
		}
	}
}

// take returns the files of generation gen parsed so far and forgets
// them: gen is read whole now, and its loader parses the rest. Those of
// gen still queued are dropped; take waits for those being parsed.
func (p *preparer) take(gen string) map[string]*configdir.Prepared {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.queue[:0]
	for _, j := range p.queue {
		if j.gen != gen {
			kept = append(kept, j)
		}
	}
	clear(p.queue[len(kept):])
	p.queue = kept
	for p.inFlight[gen] > 0 && !p.stopped {
		p.cond.Wait()
	}
	files := p.done[gen]
	delete(p.done, gen)
	return files
}
