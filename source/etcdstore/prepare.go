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
	latest   map[genPath]uint64                        // the job of a file's latest put, until done or dropped
	seq      uint64                                    // the latest job's number
	done     map[string]map[string]*configdir.Prepared // by generation, then path
	stopped  bool
}

// genPath is a file of a generation.
type genPath struct{ gen, path string }

// prepareJob is a file of a generation being written, to parse: the
// seq-th put.
type prepareJob struct {
	genPath
	data []byte
	seq  uint64
}

func newPreparer() *preparer {
	p := &preparer{inFlight: map[string]int{}, latest: map[genPath]uint64{}, done: map[string]map[string]*configdir.Prepared{}}
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

// work parses queued files until the preparer stops. A file put again
// or deleted while it was parsed keeps nothing of the parse.
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
		if p.latest[j.genPath] != j.seq {
			continue // put again or deleted since
		}
		p.inFlight[j.gen]++
		p.mu.Unlock()
		parsed := configdir.Prepare(j.path, j.data)
		p.mu.Lock()
		if p.inFlight[j.gen]--; p.inFlight[j.gen] == 0 {
			delete(p.inFlight, j.gen)
		}
		if p.latest[j.genPath] == j.seq {
			delete(p.latest, j.genPath)
			if p.done[j.gen] == nil {
				p.done[j.gen] = map[string]*configdir.Prepared{}
			}
			p.done[j.gen][j.path] = parsed
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
	p.forget(genPath{gen, path}) // parsed from bytes no longer there
	p.seq++
	p.latest[genPath{gen, path}] = p.seq
	p.queue = append(p.queue, prepareJob{genPath{gen, path}, data, p.seq})
	p.cond.Signal()
}

// remove forgets the file at path of generation gen, deleted.
func (p *preparer) remove(gen, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forget(genPath{gen, path})
}

// forget drops what was parsed of the file f, and makes a parse of it
// queued or under way keep nothing; p.mu is held.
func (p *preparer) forget(f genPath) {
	delete(p.latest, f)
	if files := p.done[f.gen]; files != nil {
		delete(files, f.path)
		if len(files) == 0 {
			delete(p.done, f.gen)
		}
	}
}

// take returns the files of generation gen parsed so far and forgets
// every generation's: gen is read whole now, and its loader parses the
// rest. The queue is dropped; take waits for the files of gen being
// parsed, unless the preparer has stopped. A generation written before
// the one in force can no longer become current (its writer's switch is
// guarded by the generation in force), and one written after it is put
// again: a writer that raced another starts again from its read.
func (p *preparer) take(gen string) map[string]*configdir.Prepared {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.queue)
	p.queue = p.queue[:0]
	for p.inFlight[gen] > 0 && !p.stopped {
		p.cond.Wait()
	}
	files := p.done[gen]
	clear(p.latest) // what is parsed from here on keeps nothing
	clear(p.done)
	return files
}
