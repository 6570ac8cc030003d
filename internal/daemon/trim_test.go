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
