package daemon

import (
	"context"
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
		trimHeap(ctx)
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
	t0 := time.Now()
	h := heapLook{free: 32 << 20, objects: 64 << 20, cycles: 1, allocs: 100 << 20}
	if tr.due(t0, h) {
		t.Fatal("trimmed on its first look: nothing says the burst is over")
	}
	if !tr.due(t0.Add(trimEvery), h) {
		t.Fatal("no trim once quiet with 32 MiB free")
	}
	tr.trimmed(t0.Add(trimEvery), heapLook{objects: 64 << 20, cycles: 2, allocs: 100 << 20})

	// A small burst, then quiet, within trimAtMost: no trim.
	at := t0.Add(time.Second)
	small := heapLook{free: 20 << 20, objects: 64 << 20, cycles: 3, allocs: 120 << 20}
	tr.due(at, small)
	if tr.due(at.Add(trimEvery), small) {
		t.Fatal("trimmed again within trimAtMost after a small burst")
	}
	// Busy: a collection ran since the last look.
	busy := heapLook{free: 40 << 20, objects: 64 << 20, cycles: 4, allocs: 120 << 20}
	if tr.due(at.Add(2*trimEvery), busy) {
		t.Fatal("trimmed while collections still run")
	}
	// A large burst, then quiet, still within trimAtMost: trim.
	large := heapLook{free: 40 << 20, objects: 64 << 20, cycles: 9, allocs: 100<<20 + trimBurst}
	tr.due(at.Add(3*trimEvery), large)
	if !tr.due(at.Add(4*trimEvery), large) {
		t.Fatal("no trim after a burst of trimBurst bytes")
	}
	// Too little free, or too small a share of the heap: no trim.
	var fresh trimmer
	few := heapLook{free: trimMinFree - 1, objects: 8 << 20}
	fresh.due(t0, few)
	if fresh.due(t0.Add(trimEvery), few) {
		t.Fatal("trimmed with less than trimMinFree free")
	}
	share := heapLook{free: 20 << 20, objects: 200 << 20}
	fresh.due(t0, share)
	if fresh.due(t0.Add(trimEvery), share) {
		t.Fatal("trimmed with less than trimMinRatio of the heap free")
	}
}
