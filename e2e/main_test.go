package e2e_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/testutil/xdstest"
)

// TestMain checks for leaked goroutines once every test, and every cleanup
// (ClientConns, backends, the xdsd gRPC server), has run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, xdstest.LeakOptions()...) }
