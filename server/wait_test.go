package server_test

import (
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// waitFor polls cond until it holds, failing the test after rawxds.Timeout.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(rawxds.Timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", rawxds.Timeout)
		}
		<-tick.C
	}
}
