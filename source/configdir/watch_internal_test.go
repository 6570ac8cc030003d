package configdir

import (
	"testing"
	"time"
)

// TestQuietGrowsWithABurst: the load waits Debounce after a lone event, and
// after an event of a long burst an eighth of the burst so far, up to
// Settle, so that a writer putting many files in place, and pausing, is
// loaded once.
func TestQuietGrowsWithABurst(t *testing.T) {
	w := &watch{}
	now := time.Now()
	if got := w.quiet(now); got != Debounce {
		t.Errorf("a lone event: quiet %v, want Debounce (%v)", got, Debounce)
	}
	w.schedule(Debounce)
	defer w.stopTimer()
	for _, c := range []struct{ age, want time.Duration }{
		{0, Debounce},
		{2 * time.Millisecond, Debounce},
		{8 * time.Millisecond, Debounce},
		{20 * time.Millisecond, 2500 * time.Microsecond},
		{time.Second, Settle},
	} {
		w.first = now.Add(-c.age)
		if got := w.quiet(now); got != c.want {
			t.Errorf("an event %v into a burst: quiet %v, want %v", c.age, got, c.want)
		}
	}
}
