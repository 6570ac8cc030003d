// Package poll waits in tests for a condition that nothing signals, by
// checking it on a short ticker until a deadline.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until checks its condition.
const Interval = 5 * time.Millisecond

// Until checks cond every Interval until it holds, failing t if it does
// not within timeout; what says what is waited for.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, timeout)
		}
	}
}
