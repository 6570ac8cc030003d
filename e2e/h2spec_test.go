package e2e_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil/golden"
)

// h2specTimeout bounds one h2spec run against one transport.
const h2specTimeout = 5 * time.Minute

// TestH2Spec runs h2spec, the HTTP/2 conformance suite
// (github.com/summerwind/h2spec, which .ci/run installs), against xdsd's
// xDS port on its own transport, and compares the cases that fail with
// those pinned in testdata/h2spec/<transport>.txt: a change that makes a
// case pass or fail shows, and the pin is rewritten with -update.
// h2spec speaks plain HTTP/2, not gRPC: a gRPC server answers its requests
// with a trailers-only error and ends the stream, which some cases, written
// for servers that send a body, count as failures.
func TestH2Spec(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("h2spec")
	if err != nil {
		if os.Getenv("XDSD_H2SPEC") == "required" {
			t.Fatalf("h2spec: %v (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible)", err)
		}
		t.Skipf("h2spec not installed: %v", err)
	}
	// xdsd's own transport; grpc-go's, which is grpc-go's business, fails
	// more cases, and some of them only when the machine is slow.
	for _, transport := range []string{"xdsd"} {
		t.Run(transport, func(t *testing.T) {
			cfg := newConfigDir(t)
			cfg.writeService(dummyA)
			d := startReady(t, nil, serveArgs(cfg.dir, "--grpc-transport", transport)...)
			host, port, err := net.SplitHostPort(d.xds)
			if err != nil {
				t.Fatal(err)
			}
			report := filepath.Join(t.TempDir(), "h2spec.xml")
			ctx, cancel := context.WithTimeout(context.Background(), h2specTimeout)
			defer cancel()
			// -o: how long h2spec waits for each expected frame (default 2 s).
			out, err := exec.CommandContext(ctx, bin, "-h", host, "-p", port, "-o", "3", "-j", report).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("h2spec did not finish within %v:\n%s", h2specTimeout, out)
			}
			// h2spec's exit status is 1 when a case fails; the report says which.
			if _, ok := err.(*exec.ExitError); err != nil && !ok {
				t.Fatalf("h2spec: %v", err)
			}
			failed, err := h2specFailures(report)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			golden.Check(t, filepath.Join("testdata", "h2spec", transport+".txt"), strings.Join(failed, "\n")+"\n")
		})
	}
}

// h2specReport is the part of h2spec's JUnit report that says which cases
// failed.
type h2specReport struct {
	Suites []struct {
		Cases []struct {
			Package string    `xml:"package,attr"`
			Name    string    `xml:"classname,attr"`
			Error   *struct{} `xml:"error"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// h2specFailures returns the cases the JUnit report at path lists as
// failed, as "package: name", in the report's order.
func h2specFailures(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("h2spec's report: %w", err)
	}
	var rep h2specReport
	if err := xml.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("h2spec's report: %w", err)
	}
	var failed []string
	n := 0
	for _, s := range rep.Suites {
		for _, c := range s.Cases {
			n++
			if c.Error != nil || c.Failure != nil {
				failed = append(failed, c.Package+": "+c.Name)
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("h2spec's report %s lists no case", path)
	}
	return failed, nil
}
