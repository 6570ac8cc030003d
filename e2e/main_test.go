package e2e_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/testutil/xdstest"
)

// TestMain checks for leaked goroutines once every test, and every cleanup
// (ClientConns, backends, the xdsd gRPC server, xdsd subprocesses), has
// run; then it removes the xdsd binary built for the tests, if any.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(xdstest.LeakOptions(), goleak.Cleanup(func(code int) {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
		os.Exit(code)
	}))...)
}

// testVersion is the version the test binary of xdsd is stamped with
// (-ldflags -X main.version), so that `xdsd version` can be checked.
const testVersion = "v0.0.0-e2e"

// The xdsd binary, built once, on first use, by xdsdBinary.
var (
	binOnce sync.Once
	binDir  string // removed by TestMain
	binPath string
	binErr  error
)

// xdsdBinary returns the path of an xdsd binary built from this module's
// ./cmd/xdsd, building it the first time. When the tests run with -race,
// so is the binary built, so that races in the daemon fail its exit
// status.
func xdsdBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = buildXDSD() })
	if binErr != nil {
		t.Fatalf("building xdsd: %v", binErr)
	}
	return binPath
}

func buildXDSD() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not in a module")
	}
	binDir, err = os.MkdirTemp("", "xdsd-e2e-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "xdsd")
	args := []string{"build", "-o", bin, "-ldflags=-X main.version=" + testVersion}
	if raceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/xdsd")...)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return bin, nil
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
