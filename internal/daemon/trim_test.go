package daemon

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func heapFree() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink [][]byte

func TestTrimHeapReturnsFreedMemory(t *testing.T) {
	for range 96 {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	runtime.GC()
	if heapFree() < trimMinFree {
		t.Skip("the runtime returned the garbage by itself")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimHeap(ctx, slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for heapFree() >= trimMinFree {
		if time.Now().After(deadline) {
			t.Fatalf("%d MiB of freed heap still resident", heapFree()>>20)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by deadline
	}
}

func TestTrimmerWaitsForQuietThenLimitsItsRate(t *testing.T) {
	var tr trimmer
	h := heapLook{free: 32 << 20, objects: 64 << 20, live: 64 << 20, cycles: 5, allocs: 100 << 20}
	if tr.due(h) {
		t.Fatal("trimmed on its first look: nothing says the burst is over")
	}
	if !tr.due(h) {
		t.Fatal("no trim once quiet with 32 MiB free")
	}
	tr.trimmed(heapLook{objects: 64 << 20, live: 64 << 20, cycles: 6, allocs: 100 << 20})

	// One collection since the trim, then quiet: no trim yet.
	one := heapLook{free: 20 << 20, objects: 64 << 20, live: 64 << 20, cycles: 7, allocs: 120 << 20}
	tr.due(one)
	if tr.due(one) {
		t.Fatalf("trimmed after %d collection of the runtime's own, want %d", 1, trimCycles)
	}
	// Busy: a collection ran since the last look.
	busy := heapLook{free: 40 << 20, objects: 64 << 20, live: 64 << 20, cycles: 8, allocs: 120 << 20}
	if tr.due(busy) {
		t.Fatal("trimmed while collections still run")
	}
	// Allocating more than trimQuiet since the last look is busy too.
	if tr.due(heapLook{free: 40 << 20, objects: 64 << 20, live: 64 << 20, cycles: 8, allocs: 120<<20 + 2*trimQuiet}) {
		t.Fatal("trimmed while allocating")
	}
	if !tr.due(heapLook{free: 40 << 20, objects: 64 << 20, live: 64 << 20, cycles: 8, allocs: 120<<20 + 2*trimQuiet}) {
		t.Fatal("no trim after two collections and a quiet look")
	}
	// Garbage not yet collected counts: objects allocated since the last
	// collection found 40 MiB live.
	var fresh trimmer
	uncollected := heapLook{free: 1 << 20, objects: 64 << 20, live: 40 << 20, cycles: 3}
	fresh.due(uncollected)
	if !fresh.due(uncollected) {
		t.Fatal("no trim with 24 MiB allocated since the last collection and 1 MiB free")
	}
	// Too little free, or too small a share of the heap: no trim.
	for _, h := range []heapLook{
		{free: trimMinFree - 1, objects: 8 << 20, live: 8 << 20, cycles: 10},
		{free: 20 << 20, objects: 200 << 20, live: 200 << 20, cycles: 10},
	} {
		var fresh trimmer
		fresh.due(h)
		if fresh.due(h) {
			t.Fatalf("trimmed %d MiB free of %d MiB", h.free>>20, h.objects>>20)
		}
	}
}
