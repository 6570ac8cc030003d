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
	trimAtMost   = 5 * time.Second        // between two trims
)

// trimHeap returns freed heap to the operating system when at least
// trimMinFree bytes (and trimMinRatio of the heap) are free and resident,
// and the burst is over: no collection has run and at most trimQuiet bytes
// were allocated since the last look. It forces one collection per trim,
// at most once per trimAtMost, and returns when ctx ends.
func trimHeap(ctx context.Context) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/allocs:bytes"},
	}
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	var lastCycles, lastAllocs uint64
	var lastTrim time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			metrics.Read(samples)
			free, objects := samples[0].Value.Uint64(), samples[1].Value.Uint64()
			cycles, allocs := samples[2].Value.Uint64(), samples[3].Value.Uint64()
			quiet := cycles == lastCycles && allocs-lastAllocs <= trimQuiet
			lastCycles, lastAllocs = cycles, allocs
			if quiet && free >= trimMinFree && float64(free) >= trimMinRatio*float64(objects) && now.Sub(lastTrim) >= trimAtMost {
				debug.FreeOSMemory()
				lastTrim = now
				metrics.Read(samples)
				lastCycles, lastAllocs = samples[2].Value.Uint64(), samples[3].Value.Uint64()
			}
		}
	}
}
