// Package heaptrim returns the heap an xDS server freed after a burst to
// the operating system: the trimmer that xdsd serve runs, for programs that
// embed xdsd's server.
//
// Go keeps freed heap pages until the heap goal says it may need them
// again, and that goal counts goroutine stacks: after thousands of clients
// connect at once, the garbage of their initial sync stays resident for as
// long as they stay idle, often as much again as the live heap. The trimmer
// gives it back once the burst is over, as Envoy's shrink_heap overload
// action does for its own heap. It reads the runtime's heap statistics
// every 50 ms; once garbage shows and the process has been quiet for 100 ms
// (a second while clients have responses to answer; two seconds if all
// that shows is a collection in a burst that found the live heap half
// again its least), it runs a collection, then debug.FreeOSMemory, which
// collects again and returns the free pages.
// After the first, a trim in a sync (clients joining) comes once a heap's
// worth has been allocated since the last; other trims come at least a
// second and twenty times the last one's cost apart, so that they take at
// most a twentieth of one core.
//
// It acts on the whole process: a program runs one, and with several
// servers passes a Clients that sums theirs (or nil). It runs until its
// context ends:
//
//	ctx, stop := context.WithCancel(context.Background())
//	done := make(chan struct{})
//	go func() { defer close(done); heaptrim.Run(ctx, logger, srv) }() // srv: a *server.Server
//	// ... serve ...
//	stop()
//	<-done
package heaptrim

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	trimEvery         = 50 * time.Millisecond // how often the heap is looked at
	trimLooks         = 2                     // quiet looks in a row before a trim: 100 ms
	trimLooksAwaiting = 20                    // the same while clients have responses to answer: 1 s
	trimLooksRested   = 40                    // quiet looks in a row before a trim of a heap a little swollen: 2 s
	trimMinFree       = 8 << 20               // reclaimable (see heapLook): at least this
	trimMinRatio      = 0.25                  // and at least this share of the heap's objects
	trimQuiet         = 512 << 10             // allocated since the last look: at most this
	trimIdleCPU       = 5 * time.Millisecond  // CPU used since the last look: at most this (a tenth)
	trimGap           = time.Second           // since a trim: at least this before the next (but see trimJoined),
	trimShare         = 20                    // and at least this many times the trim's cost
	trimJoined        = 64                    // streams opened since a trim, or awaiting replies at it, that make a sync
)

// Clients is what the trimmer asks of the server about its clients, to
// tell a sync from pushes to the clients it has (*server.Server has both).
type Clients interface {
	// AwaitingReplies returns how many responses their clients have yet to
	// answer.
	AwaitingReplies() int64
	// StreamsOpened returns how many streams have opened so far.
	StreamsOpened() uint64
}

// Run returns freed heap to the operating system after bursts, as the
// package says, looking every 50 ms, and returns when ctx ends. It logs
// each trim at debug level to log, if log is not nil. c may be nil; then
// the trimmer cannot tell a sync: after the first trim, each waits out the
// rate limit, as after pushes, and a quiet spell in the middle of a sync
// may be taken for its end.
func Run(ctx context.Context, log *slog.Logger, c Clients) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	look := func() heapLook {
		metrics.Read(samples)
		h := heapLook{free: samples[0].Value.Uint64(), objects: samples[1].Value.Uint64(),
			cycles: samples[2].Value.Uint64(), allocs: samples[3].Value.Uint64(), live: samples[4].Value.Uint64(),
			cpu: processCPU()}
		if c != nil {
			h.awaiting, h.opened = c.AwaitingReplies(), c.StreamsOpened()
		}
		return h
	}
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	var tr trimmer
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if h := look(); tr.due(now, h) {
				// Two collections: the first moves what sync.Pools hold
				// (the transport's buffers, put back at the end of a burst)
				// to their victim caches, where it stays live until the
				// second (debug.FreeOSMemory's), which frees it: after one
				// alone, the pools' buffers would stay resident.
				runtime.GC()
				debug.FreeOSMemory()
				after := look()
				// The cost: the process's CPU (the collections use every
				// core), or the time where that is unknown.
				took := max(time.Since(now), after.cpu-h.cpu)
				// Streams that opened while the trim ran joined after it.
				after.opened, after.awaiting = h.opened, h.awaiting
				tr.trimmed(now, after, took)
				log.Debug("returned freed heap to the OS", "reclaimable_mib", h.reclaimable()>>20, "heap_mib", after.objects>>20,
					"took", took.Round(time.Millisecond))
			}
		}
	}
}

// heapLook is what the trimmer reads of the heap.
type heapLook struct {
	free, objects  uint64        // bytes freed and still resident; bytes in objects
	live           uint64        // bytes the last collection found live
	cycles, allocs uint64        // collections run; bytes allocated: both cumulative
	cpu            time.Duration // the process's CPU time (0 where unknown)
	awaiting       int64         // responses their clients have yet to answer
	opened         uint64        // streams opened: cumulative
}

// reclaimable is what a collection would leave free and resident: the free
// bytes, and the objects allocated since the last collection, most of
// them garbage once a burst is over.
func (h heapLook) reclaimable() uint64 {
	return h.free + h.objects - min(h.live, h.objects)
}

// trimmer decides when to trim: when at least trimMinFree bytes (and
// trimMinRatio of the heap's objects) are reclaimable, or the last
// collection found the live heap swollen (see due), and the burst is over:
// for trimLooks looks in a row, no collection has run, at most
// trimQuiet bytes were allocated and at most trimIdleCPU was used since the
// previous look (a server waiting for its clients in the middle of a burst
// allocates little, but still works).
//
// A trim costs more than its two collections: it empties the pools, whose
// buffers the next burst allocates anew, and gives back pages the next
// burst faults in again. So, after the first, trims come at most once per
// trimGap and trimShare times the last trim's cost (its CPU: they take at
// most a twentieth of it), and only if the process worked or allocated
// what the heap held live after the last trim (a heap's worth) since. A
// process that stays quiet while it allocates less, a trickle at a time,
// is not trimmed. (Pushes to many clients that repeat a large node each
// allocate more than a heap's worth of read buffers; a trim after each
// would cost about as much CPU as the push.)
//
// One exception: a heap's worth allocated in a sync (trimJoined streams
// opened since the last trim, or as many responses awaiting their replies
// when it began: a trim in a lull of a sync) is trimmed as soon as it is
// quiet, however dear the last trim. A sync that went on after a trim in
// one of its lulls, or clients that connect in waves, would otherwise
// stay resident at its peak for trimShare times that trim's cost. A few
// clients reconnecting, or a few that do not answer, do not make pushes a
// sync. Its zero value is ready.
type trimmer struct {
	last       heapLook      // at the previous look
	quiet      int           // quiet looks in a row
	atTrim     heapLook      // after the last trim; its opened and awaiting as it began
	trimmedAt  time.Time     // when
	took       time.Duration // what it cost
	hasTrimmed bool          // a trim has run
	worked     bool          // a look since the last trim was not quiet
	// floor is the least live heap a collection has found since the last
	// trim, or what the trim left; zero until a collection has run.
	floor uint64
}

func (tr *trimmer) due(now time.Time, h heapLook) bool {
	if h.cycles == tr.last.cycles && h.allocs-tr.last.allocs <= trimQuiet && h.cpu-tr.last.cpu <= trimIdleCPU {
		tr.quiet++
	} else {
		tr.quiet, tr.worked = 0, true
	}
	tr.last = h
	if h.live > 0 && (tr.floor == 0 || h.live < tr.floor) {
		tr.floor = h.live
	}
	r := h.reclaimable()
	heapsWorth := !tr.hasTrimmed || h.allocs-tr.atTrim.allocs >= max(trimMinFree, tr.atTrim.live)
	syncing := !tr.hasTrimmed || h.opened-tr.atTrim.opened >= trimJoined || tr.atTrim.awaiting >= trimJoined
	rested := !tr.hasTrimmed || now.Sub(tr.trimmedAt) >= max(trimGap, trimShare*tr.took)
	eager := heapsWorth && syncing
	paid := eager || rested && (heapsWorth || tr.worked)
	// A collection in the middle of a burst finds the burst's buffers live
	// (in flight, or kept by sync.Pools for two collections), and once the
	// burst is over nothing may allocate enough for another to run: the
	// heap then looks live, though most of it is garbage. A live heap well
	// above the least found calls for a trim to find out, when paid: a
	// server whose every burst of pushes meets a collection would
	// otherwise trim after each, the trim having emptied the pools the
	// floor was read with.
	swollen := h.live >= 2*tr.floor+trimMinFree
	// Less swollen, by half again the least live heap and at least
	// trimMinFree, it is trimmed once the process has rested for
	// trimLooksRested looks: a collection in a push to many clients can
	// find the push's buffers live, and without a trim they stay resident
	// while the clients are idle. Not sooner: a server pushing every
	// second or so would pay a trim, and the refill of the pools it
	// empties, every few pushes.
	if !swollen && tr.quiet >= trimLooksRested {
		swollen = h.live >= tr.floor+max(trimMinFree, tr.floor/2)
	}
	worth := swollen || r >= trimMinFree && float64(r) >= trimMinRatio*float64(h.objects)
	// While clients have responses to answer, a quiet spell may be a lull
	// in a burst (the server waiting for clients busy with what it sent,
	// thousands of them syncing): a trim then finds the burst's memory
	// live, and its end calls for another (see syncing). A second
	// of quiet is asked for then; the end of a sync, every response
	// answered, is trimmed after trimLooks. A client that never answers
	// delays trims by a second, no more.
	looks := trimLooks
	if h.awaiting > 0 {
		looks = trimLooksAwaiting
	}
	return tr.quiet >= looks && worth && paid
}

// trimmed records a trim that started at now and cost took, h being the
// heap after it.
func (tr *trimmer) trimmed(now time.Time, h heapLook, took time.Duration) {
	tr.last, tr.atTrim, tr.trimmedAt, tr.took, tr.hasTrimmed, tr.quiet, tr.worked = h, h, now, took, true, 0, false
	tr.floor = h.live
}
