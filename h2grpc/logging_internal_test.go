package h2grpc

import (
	"testing"
	"time"
)

// TestLogLimit: a burst of violationBurst lines passes, then one per
// violationEvery; the first to pass after some were dropped counts them.
func TestLogLimit(t *testing.T) {
	var l logLimit
	now := time.Unix(1000, 0)
	for i := range violationBurst {
		if ok, n := l.allow(now); !ok || n != 0 {
			t.Fatalf("line %d of the burst: allowed %v, %d suppressed", i, ok, n)
		}
	}
	for range 5 {
		if ok, _ := l.allow(now.Add(violationEvery / 2)); ok {
			t.Fatal("a line past the burst allowed before a token came back")
		}
	}
	if ok, n := l.allow(now.Add(violationEvery)); !ok || n != 5 {
		t.Fatalf("a token later: allowed %v, %d suppressed, want true, 5", ok, n)
	}
	if ok, _ := l.allow(now.Add(violationEvery)); ok {
		t.Fatal("two lines allowed for one token")
	}
	if ok, n := l.allow(now.Add(time.Hour)); !ok || n != 1 {
		t.Fatalf("an hour later: allowed %v, %d suppressed, want true, 1", ok, n)
	}
	for i := 1; i < violationBurst; i++ { // the bucket refilled up to the burst, no more
		if ok, _ := l.allow(now.Add(time.Hour)); !ok {
			t.Fatalf("line %d of a burst an hour later not allowed", i+1)
		}
	}
	if ok, _ := l.allow(now.Add(time.Hour)); ok {
		t.Fatal("more than a burst allowed after an hour")
	}
}
