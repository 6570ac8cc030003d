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
	trimEvery    = 250 * time.Millisecond // how often the heap is looked at
	trimMinFree  = 32 << 20               // freed and still resident: at least this
	trimMinRatio = 0.5                    // and at least this share of the heap's objects
	trimAtMost   = time.Minute            // between two trims
)

// trimHeap returns freed heap to the operating system when at least
// trimMinFree bytes (and trimMinRatio of the heap) are free and resident,
// and no collection has run since the last look (the burst is over). It
// forces one collection per trim, at most once per trimAtMost, and returns
// when ctx ends.
func trimHeap(ctx context.Context) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	var lastCycles uint64
	var lastTrim time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			metrics.Read(samples)
			free, objects, cycles := samples[0].Value.Uint64(), samples[1].Value.Uint64(), samples[2].Value.Uint64()
			quiet := cycles == lastCycles
			lastCycles = cycles
			if quiet && free >= trimMinFree && float64(free) >= trimMinRatio*float64(objects) && now.Sub(lastTrim) >= trimAtMost {
				debug.FreeOSMemory()
				lastTrim = now
				metrics.Read(samples)
				lastCycles = samples[2].Value.Uint64()
			}
		}
	}
}
