package heaptrim

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

func heapFree() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink [][]byte

func TestRunReturnsFreedMemory(t *testing.T) {
	for range 96 {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	runtime.GC()
	if heapFree() < trimMinFree {
		t.Skip("the runtime returned the garbage by itself")
	}
	trimUntil(t, func() bool { return heapFree() < trimMinFree }, func() string {
		return fmt.Sprintf("%d MiB of freed heap still resident", heapFree()>>20)
	})
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestRunReturnsPooledMemory checks that a trim also returns what
// sync.Pools held: a transport's buffers, put back at the end of a burst
// (thousands of clients' first requests), survive one collection in the
// pools' victim caches.
func TestRunReturnsPooledMemory(t *testing.T) {
	// No collection but the trimmer's: one run by the runtime would count
	// the pool's buffers live (in its victim cache) until the next.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var pool sync.Pool
	for range 96 {
		b := make([]byte, 1<<20)
		pool.Put(&b)
	}
	for range 32 { // the burst's garbage: with the pool's buffers, more than the 100 MiB checked below
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	before := heapObjects()
	trimUntil(t, func() bool { return heapObjects()+100<<20 <= before }, func() string {
		return fmt.Sprintf("the heap holds %d MiB of objects, %d MiB before: the pool's buffers are still there", heapObjects()>>20, before>>20)
	})
	runtime.KeepAlive(&pool)
}

// trimUntil runs the trimmer until done reports true, and fails the test
// with what if that takes more than 10 s. It looks again after each trim
// (the trimmer logs each one), and at each of the trimmer's looks, since
// the runtime may also return memory by itself, with no trim to tell.
func trimUntil(t *testing.T, done func() bool, what func() string) {
	t.Helper()
	trims := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		Run(ctx, slog.New(trimsTold{trims}), nil)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	looks := time.NewTicker(trimEvery)
	defer looks.Stop()
	timeout := time.After(testTimeout)
	for !done() {
		select {
		case <-trims:
		case <-looks.C:
		case <-timeout:
			t.Fatal(what())
		}
	}
}

// trimsTold is a log handler that tells trims of each record: the
// trimmer logs one per trim.
type trimsTold struct{ trims chan<- struct{} }

func (h trimsTold) Enabled(context.Context, slog.Level) bool { return true }
func (h trimsTold) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h trimsTold) WithGroup(string) slog.Handler            { return h }
func (h trimsTold) Handle(context.Context, slog.Record) error {
	select {
	case h.trims <- struct{}{}:
	default:
	}
	return nil
}

// clock is the time the trimmer tests look at the heap: it moves by
// trimEvery at each look.
var clock = time.Unix(1e9, 0)

// due has tr look at h once, a look after the previous one.
func due(tr *trimmer, h heapLook) bool {
	clock = clock.Add(trimEvery)
	return tr.due(clock, h)
}

// look has the trimmer look at h n times, and returns its last answer.
func look(tr *trimmer, h heapLook, n int) bool {
	d := false
	for range n {
		d = due(tr, h)
	}
	return d
}

func TestTrimmerWaitsForQuietThenLimitsItsRate(t *testing.T) {
	var tr trimmer
	h := heapLook{free: 32 << 20, objects: 64 << 20, live: 64 << 20, cycles: 5, allocs: 100 << 20}
	if look(&tr, h, trimLooks) {
		t.Fatal("trimmed before trimLooks quiet looks: the first says nothing of the burst")
	}
	if !due(&tr, h) {
		t.Fatal("no trim once quiet with 32 MiB free")
	}
	tr.trimmed(clock, heapLook{objects: 48 << 20, live: 48 << 20, cycles: 6, allocs: 100 << 20}, 0)

	// Less than the live heap (48 MiB) allocated since a trim, quiet all
	// along (a trickle): no trim, however long it stays so.
	var tt trimmer
	tt.trimmed(clock, heapLook{objects: 48 << 20, live: 48 << 20, cycles: 6, allocs: 100 << 20}, 0)
	trickle := heapLook{free: 20 << 20, objects: 64 << 20, live: 48 << 20, cycles: 6, allocs: 100 << 20}
	for range 20 {
		trickle.allocs += trimQuiet / 2
		clock = clock.Add(time.Minute)
		if due(&tt, trickle) {
			t.Fatal("trimmed again with less than the live heap allocated since the last trim, quiet all along")
		}
	}
	// The same, with work since the trim and clients joining: no trim
	// until a heap's worth is allocated (see below).
	tr.trimmed(clock, heapLook{objects: 48 << 20, live: 48 << 20, cycles: 6, allocs: 100 << 20}, 0)
	some := heapLook{free: 20 << 20, objects: 64 << 20, live: 48 << 20, cycles: 7, allocs: 140 << 20, opened: 100}
	if look(&tr, some, trimLooks+3) {
		t.Fatal("trimmed again with less than the live heap allocated since the last trim")
	}
	// More: a collection ran since the last look (busy), then quiet looks.
	busy := heapLook{free: 40 << 20, objects: 64 << 20, live: 48 << 20, cycles: 8, allocs: 150 << 20, opened: 200}
	if due(&tr, busy) {
		t.Fatal("trimmed while collections still run")
	}
	// Allocating more than trimQuiet since the last look is busy too.
	alloc := heapLook{free: 40 << 20, objects: 64 << 20, live: 48 << 20, cycles: 8, allocs: 150<<20 + 2*trimQuiet, opened: 200}
	if due(&tr, alloc) {
		t.Fatal("trimmed while allocating")
	}
	if look(&tr, alloc, trimLooks-1) || !due(&tr, alloc) {
		t.Fatal("want a trim after exactly trimLooks quiet looks")
	}
	// Working without allocating is not quiet either.
	var worker trimmer
	work := heapLook{free: 40 << 20, objects: 64 << 20, live: 64 << 20, cycles: 3}
	due(&worker, work)
	for range trimLooks + 1 {
		work.cpu += 2 * trimIdleCPU
		if due(&worker, work) {
			t.Fatal("trimmed while the process works")
		}
	}
	// Garbage not yet collected counts: objects allocated since the last
	// collection found 40 MiB live.
	var fresh trimmer
	if !look(&fresh, heapLook{free: 1 << 20, objects: 64 << 20, live: 40 << 20, cycles: 3}, trimLooks+1) {
		t.Fatal("no trim with 24 MiB allocated since the last collection and 1 MiB free")
	}
	// Memory freed without allocating (clients leaving: a collection ran
	// since the trim), or a burst that went on after a trim in one of its
	// lulls: trimmed once trimGap, and trimShare times the last trim's
	// cost, have passed since it.
	for _, took := range []time.Duration{10 * time.Millisecond, 200 * time.Millisecond} {
		var left trimmer
		at := clock
		left.trimmed(at, heapLook{objects: 64 << 20, live: 64 << 20, cycles: 20, allocs: 500 << 20}, took)
		freed := heapLook{free: 40 << 20, objects: 24 << 20, live: 24 << 20, cycles: 21, allocs: 500 << 20}
		if look(&left, freed, trimLooks+2) {
			t.Fatal("trimmed again right after a trim, with nothing allocated")
		}
		gap := max(trimGap, trimShare*took)
		clock = at.Add(gap - 2*trimEvery) // due adds one trimEvery
		if due(&left, freed) {
			t.Fatalf("trimmed %v after a trim that cost %v", clock.Sub(at), took)
		}
		if !due(&left, freed) {
			t.Fatalf("no trim %v after a trim that cost %v, with 40 MiB free", clock.Sub(at), took)
		}
	}
	// A collection at a burst's peak found it all live, and nothing
	// allocated since: trimmed once quiet, as the heap is swollen against
	// the least live heap found before; then not again for the same heap.
	var peak trimmer
	due(&peak, heapLook{objects: 31 << 20, live: 30 << 20, cycles: 1, allocs: 20 << 20}) // before clients left
	calm := heapLook{free: 1 << 20, objects: 13 << 20, live: 12 << 20, cycles: 2, allocs: 30 << 20}
	if look(&peak, calm, trimLooks+2) {
		t.Fatal("trimmed 1 MiB of garbage")
	}
	if look(&peak, heapLook{objects: 32 << 20, live: 31 << 20, cycles: 3, allocs: 90 << 20}, trimLooks+2) {
		t.Fatal("trimmed a heap found less than twice the least live heap and trimMinFree")
	}
	swollen := heapLook{objects: 33 << 20, live: 32 << 20, cycles: 5, allocs: 230 << 20} // 2 × 12 + 8 MiB
	if due(&peak, swollen) || look(&peak, swollen, trimLooks-1) || !due(&peak, swollen) {
		t.Fatal("want a trim after trimLooks quiet looks at a heap a collection found swollen")
	}
	peak.trimmed(clock, heapLook{objects: 12 << 20, live: 12 << 20, cycles: 7, allocs: 230 << 20}, 50*time.Millisecond)
	// Swollen again by the next burst of pushes, allocating less than the
	// live heap (the trim emptied the pools the next collection finds
	// full): not before trimGap.
	again := heapLook{objects: 65 << 20, live: 64 << 20, cycles: 8, allocs: 240 << 20}
	if look(&peak, again, trimLooks+2) {
		t.Fatal("trimmed a swollen heap again right after a trim")
	}
	clock = clock.Add(trimGap)
	if !due(&peak, again) {
		t.Fatal("no trim of a swollen heap trimGap after the last trim")
	}
	// After a dear trim, not before trimShare times its cost.
	took := 200 * time.Millisecond
	at := clock
	peak.trimmed(at, heapLook{objects: 12 << 20, live: 12 << 20, cycles: 9, allocs: 330 << 20}, took)
	again = heapLook{objects: 65 << 20, live: 64 << 20, cycles: 10, allocs: 340 << 20}
	if look(&peak, again, trimLooks+1) {
		t.Fatalf("trimmed a swollen heap right after a trim that cost %v", took)
	}
	clock = at.Add(trimShare*took - 2*trimEvery) // due adds one trimEvery
	if look(&peak, again, 1) {
		t.Fatalf("trimmed a swollen heap %v after a trim that cost %v", clock.Sub(at), took)
	}
	if !due(&peak, again) {
		t.Fatalf("no trim of a swollen heap %v after a trim that cost %v", clock.Sub(at), took)
	}
	// A sync that went on after a trim in one of its lulls, clients
	// joining and allocating a heap's worth, swollen at its end: trimmed
	// once quiet, however dear the last trim.
	var lull trimmer
	lull.trimmed(clock, heapLook{objects: 40 << 20, live: 40 << 20, cycles: 10, allocs: 340 << 20, opened: 100}, time.Second)
	end := heapLook{objects: 200 << 20, live: 198 << 20, cycles: 12, allocs: 340<<20 + 40<<20 - 1, opened: 900}
	due(&lull, heapLook{objects: 100 << 20, live: 90 << 20, cycles: 11, allocs: 350 << 20, opened: 500}) // work
	if look(&lull, end, trimLooks+2) {
		t.Fatal("trimmed a swollen heap right after a dear trim, with less than a heap's worth allocated since")
	}
	end.allocs++
	if !look(&lull, end, 1) {
		t.Fatal("no trim of a heap swollen at a sync's end, a heap's worth allocated since the last trim")
	}
	// Pushes to the clients there were, allocating more than a heap's
	// worth each (read buffers): trimmed at most once per trimShare times
	// the last trim's cost, not after each.
	var pushes trimmer
	at = clock
	took = 300 * time.Millisecond
	pushes.trimmed(at, heapLook{objects: 43 << 20, live: 43 << 20, cycles: 13, allocs: 400 << 20, opened: 5000}, took)
	for i := range 4 {
		push := heapLook{free: 60 << 20, objects: 100 << 20, live: 97 << 20, cycles: 14 + uint64(i), allocs: (400 + 120*uint64(i+1)) << 20, opened: 5000}
		due(&pushes, heapLook{objects: 90 << 20, live: 43 << 20, cycles: push.cycles - 1, allocs: push.allocs - 60<<20, opened: 5000}) // work
		if look(&pushes, push, trimLooks+2) {
			t.Fatalf("trimmed after push %d, %v after a trim that cost %v", i+1, clock.Sub(at), took)
		}
	}
	clock = at.Add(trimShare * took)
	if !due(&pushes, heapLook{free: 60 << 20, objects: 100 << 20, live: 97 << 20, cycles: 17, allocs: 880 << 20, opened: 5000}) {
		t.Fatalf("no trim of pushes' garbage %v after a trim that cost %v", clock.Sub(at), took)
	}
	// A few clients reconnecting do not make pushes a sync.
	pushes.trimmed(clock, heapLook{objects: 43 << 20, live: 43 << 20, cycles: 19, allocs: 880 << 20, opened: 5000}, took)
	churn := heapLook{free: 60 << 20, objects: 100 << 20, live: 97 << 20, cycles: 20, allocs: 1000 << 20, opened: 5000 + trimJoined - 1}
	if look(&pushes, churn, trimLooks+2) {
		t.Fatalf("trimmed pushes' garbage right after a trim, %d streams opened since", trimJoined-1)
	}
	// Nor does a trim while a few clients have not answered.
	var stuck trimmer
	stuck.trimmed(clock, heapLook{objects: 43 << 20, live: 43 << 20, cycles: 19, allocs: 880 << 20, opened: 5000, awaiting: trimJoined - 1}, took)
	if look(&stuck, churn, trimLooks+2) {
		t.Fatalf("trimmed pushes' garbage right after a trim with %d responses awaiting their replies", trimJoined-1)
	}
	// A trim in a lull of a sync, many responses awaiting their replies,
	// all the streams opened before it: its end, a heap's worth later, is
	// trimmed once quiet.
	var lulled trimmer
	lulled.trimmed(clock, heapLook{objects: 43 << 20, live: 43 << 20, cycles: 19, allocs: 880 << 20, opened: 5000, awaiting: trimJoined}, took)
	due(&lulled, heapLook{objects: 90 << 20, live: 80 << 20, cycles: 20, allocs: 900 << 20, opened: 5000}) // work
	if !look(&lulled, churn, trimLooks+1) {
		t.Fatal("no trim at the end of a sync, a heap's worth after a trim in one of its lulls")
	}
	// Allocating a heap's worth a trickle at a time, quiet all along:
	// trimmed, but not before the rate limit allows.
	var trickling trimmer
	at = clock
	trickling.trimmed(at, heapLook{objects: 24 << 20, live: 24 << 20, cycles: 19, allocs: 880 << 20, opened: 5000}, took)
	slow := heapLook{free: 40 << 20, objects: 60 << 20, live: 24 << 20, cycles: 19, allocs: 880 << 20, opened: 5000}
	for clock.Sub(at) < trimShare*took-trimEvery {
		slow.allocs += trimQuiet / 2
		if due(&trickling, slow) {
			t.Fatalf("trimmed %v after a trim that cost %v, quiet all along", clock.Sub(at), took)
		}
	}
	if slow.allocs-880<<20 < 24<<20 {
		t.Fatalf("the trickle allocated %d MiB, less than a heap's worth", (slow.allocs-880<<20)>>20)
	}
	slow.allocs += trimQuiet / 2
	if !due(&trickling, slow) {
		t.Fatalf("no trim %v after a trim that cost %v, a heap's worth allocated since", clock.Sub(at), took)
	}
	peak.trimmed(clock, heapLook{objects: 64 << 20, live: 64 << 20, cycles: 10, allocs: 430 << 20}, 0)
	clock = clock.Add(time.Minute)
	if look(&peak, heapLook{objects: 65 << 20, live: 64 << 20, cycles: 11, allocs: 530 << 20}, trimLooks+2) {
		t.Fatal("trimmed again a heap the last trim found live")
	}
	// Clients with responses to answer: a quiet spell may be a lull in
	// their sync; trimmed after trimLooksAwaiting quiet looks, not
	// trimLooks.
	var syncing trimmer
	mid := heapLook{free: 32 << 20, objects: 64 << 20, live: 64 << 20, cycles: 5, allocs: 100 << 20, awaiting: 3}
	if look(&syncing, mid, trimLooksAwaiting) {
		t.Fatal("trimmed in a lull of a sync, clients still to answer")
	}
	if !due(&syncing, mid) {
		t.Fatal("no trim after trimLooksAwaiting quiet looks, clients still to answer")
	}
	// Garbage of 10 MiB, two fifths of the heap's objects: worth a trim.
	var small trimmer
	if !look(&small, heapLook{free: 2 << 20, objects: 24 << 20, live: 16 << 20, cycles: 3, allocs: 40 << 20}, trimLooks+1) {
		t.Fatal("no trim with 10 MiB reclaimable")
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

// TestTrimmerTrimsALittleSwollenHeapOnceRested: a collection in a burst of
// pushes found the live heap swollen, by less than calls for a trim at
// once but by half again the least live heap: trimmed once the process
// has rested trimLooksRested looks, not in the quiet between pushes; a
// heap swollen by less is not trimmed.
func TestTrimmerTrimsALittleSwollenHeapOnceRested(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want bool
	}{
		{live: 76 << 20, want: true}, // about twice the least
		{live: 39<<20 + 39<<19, want: true},
		{live: 39<<20 + 39<<19 - 1, want: false},
	} {
		var tr trimmer
		tr.trimmed(clock, heapLook{objects: 39 << 20, live: 39 << 20, cycles: 10, allocs: 500 << 20, opened: 5000}, 150*time.Millisecond)
		clock = clock.Add(time.Minute) // the rate limit allows a trim
		push := heapLook{free: 1 << 20, objects: tc.live + 2<<20, live: tc.live, cycles: 11, allocs: 700 << 20, opened: 5000}
		if look(&tr, push, trimLooksRested) {
			t.Fatalf("live %d MiB: trimmed before the process rested", tc.live>>20)
		}
		if got := due(&tr, push); got != tc.want {
			t.Errorf("live %.1f MiB, least 39: trimmed once rested = %v, want %v", float64(tc.live)/(1<<20), got, tc.want)
		}
	}
}
