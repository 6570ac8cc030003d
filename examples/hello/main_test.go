package main

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds the test's waits: xdsd's start, the backend's and the
// client's calls.
const testTimeout = 30 * time.Second
