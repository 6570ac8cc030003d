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

// look has the trimmer look at h n times, and returns its last answer.
func look(tr *trimmer, h heapLook, n int) bool {
	due := false
	for range n {
		due = tr.due(h)
	}
	return due
}

func TestTrimmerWaitsForQuietThenLimitsItsRate(t *testing.T) {
	var tr trimmer
	h := heapLook{free: 32 << 20, objects: 64 << 20, live: 64 << 20, cycles: 5, allocs: 100 << 20}
	if look(&tr, h, trimLooks) {
		t.Fatal("trimmed before trimLooks quiet looks: the first says nothing of the burst")
	}
	if !tr.due(h) {
		t.Fatal("no trim once quiet with 32 MiB free")
	}
	tr.trimmed(heapLook{objects: 48 << 20, live: 48 << 20, cycles: 6, allocs: 100 << 20})

	// Less than the live heap (48 MiB) allocated since the trim: no trim,
	// however long it stays quiet.
	some := heapLook{free: 20 << 20, objects: 64 << 20, live: 48 << 20, cycles: 7, allocs: 140 << 20}
	if look(&tr, some, trimLooks+3) {
		t.Fatal("trimmed again with less than the live heap allocated since the last trim")
	}
	// More: a collection ran since the last look (busy), then quiet looks.
	busy := heapLook{free: 40 << 20, objects: 64 << 20, live: 48 << 20, cycles: 8, allocs: 150 << 20}
	if tr.due(busy) {
		t.Fatal("trimmed while collections still run")
	}
	// Allocating more than trimQuiet since the last look is busy too.
	alloc := heapLook{free: 40 << 20, objects: 64 << 20, live: 48 << 20, cycles: 8, allocs: 150<<20 + 2*trimQuiet}
	if tr.due(alloc) {
		t.Fatal("trimmed while allocating")
	}
	if look(&tr, alloc, trimLooks-1) || !tr.due(alloc) {
		t.Fatal("want a trim after exactly trimLooks quiet looks")
	}
	// Working without allocating is not quiet either.
	var worker trimmer
	work := heapLook{free: 40 << 20, objects: 64 << 20, live: 64 << 20, cycles: 3}
	worker.due(work)
	for range trimLooks + 1 {
		work.cpu += 2 * trimIdleCPU
		if worker.due(work) {
			t.Fatal("trimmed while the process works")
		}
	}
	// Garbage not yet collected counts: objects allocated since the last
	// collection found 40 MiB live.
	var fresh trimmer
	if !look(&fresh, heapLook{free: 1 << 20, objects: 64 << 20, live: 40 << 20, cycles: 3}, trimLooks+1) {
		t.Fatal("no trim with 24 MiB allocated since the last collection and 1 MiB free")
	}
	// Too little free, or too small a share of the heap: no trim.
	for _, h := range []heapLook{
		{free: trimMinFree - 1, objects: 8 << 20, live: 8 << 20, cycles: 10},
		{free: 20 << 20, objects: 200 << 20, live: 200 << 20, cycles: 10},
	} {
		var fresh trimmer
		if look(&fresh, h, trimLooks+1) {
			t.Fatalf("trimmed %d MiB free of %d MiB", h.free>>20, h.objects>>20)
		}
	}
}
