package daemon

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Returning freed heap to the operating system after a burst.
//
// Go keeps freed heap pages until the heap goal says it may need them
// again, and that goal counts goroutine stacks: after thousands of clients
// connect at once, the garbage of their initial sync stays resident for as
// long as they stay idle, often as much again as the live heap. The trimmer
// gives it back once the burst is over, as Envoy's shrink_heap overload
// action does for its own heap.
const (
	trimEvery    = 100 * time.Millisecond // how often the heap is looked at
	trimMinFree  = 16 << 20               // freed and still resident: at least this
	trimMinRatio = 0.25                   // and at least this share of the heap's objects
	trimQuiet    = 1 << 20                // allocated since the last look: at most this
	trimAtMost   = 5 * time.Second        // between two trims, unless
	trimBurst    = 64 << 20               // at least this was allocated since the last
)

// trimHeap returns freed heap to the operating system whenever a trimmer
// says so, looking every trimEvery, and returns when ctx ends.
func trimHeap(ctx context.Context) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/allocs:bytes"},
	}
	look := func() heapLook {
		metrics.Read(samples)
		return heapLook{free: samples[0].Value.Uint64(), objects: samples[1].Value.Uint64(),
			cycles: samples[2].Value.Uint64(), allocs: samples[3].Value.Uint64()}
	}
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	var tr trimmer
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if tr.due(now, look()) {
				debug.FreeOSMemory()
				tr.trimmed(now, look())
			}
		}
	}
}

// heapLook is what the trimmer reads of the heap.
type heapLook struct {
	free, objects  uint64 // bytes freed and still resident; bytes in objects
	cycles, allocs uint64 // collections run; bytes allocated: both cumulative
}

// trimmer decides when to trim: when at least trimMinFree bytes (and
// trimMinRatio of the heap's objects) are free and resident, and the burst
// is over (no collection has run and at most trimQuiet bytes were allocated
// since the last look). A trim forces one collection, so there is at most
// one per trimAtMost, unless trimBurst bytes were allocated since the last
// (the end of a large burst, such as thousands of clients' initial sync, is
// not kept waiting). Its zero value is ready.
type trimmer struct {
	last     heapLook  // at the previous look
	atTrim   uint64    // allocs at the last trim
	lastTrim time.Time // zero before the first
}

func (tr *trimmer) due(now time.Time, h heapLook) bool {
	quiet := h.cycles == tr.last.cycles && h.allocs-tr.last.allocs <= trimQuiet
	tr.last = h
	return quiet && h.free >= trimMinFree && float64(h.free) >= trimMinRatio*float64(h.objects) &&
		(now.Sub(tr.lastTrim) >= trimAtMost || h.allocs-tr.atTrim >= trimBurst)
}

// trimmed records a trim at now, h being the heap after it.
func (tr *trimmer) trimmed(now time.Time, h heapLook) {
	tr.last, tr.atTrim, tr.lastTrim = h, h.allocs, now
}
