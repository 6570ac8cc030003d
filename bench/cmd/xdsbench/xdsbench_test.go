package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

const (
	// testTimeout bounds every wait for something a test expects.
	testTimeout = 30 * time.Second
	// runTimeout bounds a whole run of the load tool against its servers.
	runTimeout = 2 * time.Minute
)

// TestMain lets the test binary stand in for xdsbench when the benchmark
// re-executes itself as a server under test (serve-* subcommands).
func TestMain(m *testing.M) {
	if isServeSubcommand(os.Args[1:]) {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestEndToEnd runs a tiny scenario against the real xdsd binary (built from
// this repository), go-control-plane's LinearCache and the floor server, in
// both modes, with either client (the h2 clients repeating an Envoy's
// node and writing files in place, grpc-go's with its default windows and
// read buffer and rewriting every file), and checks that every client got
// the initial state and every change.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds xdsd and starts servers")
	}
	defer goleak.VerifyNone(t)
	for _, client := range []string{clientGRPC, clientH2} {
		t.Run(client, func(t *testing.T) { endToEnd(t, client) })
	}
}

func endToEnd(t *testing.T, client string) {
	o := defaultOptions()
	o.client = client
	// The library on either transport, one per run.
	o.servers = []string{srvXDSDDir, srvXDSDLib, srvGCPLinear, srvFloor}
	lib := "xdsd (lib)"
	if client == clientH2 { // one of the runs sends Envoy's node in every request, writes files in place, and runs two passes
		o.node, o.repeatNode, o.inPlace = nodeEnvoy, true, true
		o.passes = 2
		o.servers[1], lib = srvXDSDLibGRPC, "xdsd (lib, grpc-go)"
	} else { // the other is grpc-go's client as it comes, which probes the bandwidth after responses, and rewrites every file
		o.window, o.readBuffer = 0, 32<<10
		o.rewriteAll = true
	}
	o.modes = []string{"sotw", "delta"}
	o.clients, o.clusters, o.changes, o.rounds = 20, 10, 2, 1
	o.quiet = 50 * time.Millisecond
	o.workDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	results, err := run(ctx, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(o.servers) * len(o.modes) * o.passes; len(results) != want {
		t.Fatalf("%d results, want %d", len(results), want)
	}
	for i, r := range results { // mode by mode, pass by pass, each pass's order rotated
		n := len(o.servers)
		pass, pos := i/n%o.passes, i%n
		if want := o.servers[(pos+pass)%n]; r.Server != want || r.Pass != pass || r.Mode != o.modes[i/(n*o.passes)] {
			t.Errorf("result %d: %s %s pass %d, want %s %s pass %d", i, r.Server, r.Mode, r.Pass, want, o.modes[i/(n*o.passes)], pass)
		}
	}
	for _, r := range results {
		if r.Err != "" {
			t.Errorf("%s %s: %s", r.Server, r.Mode, r.Err)
			continue
		}
		if r.InitialSync <= 0 || r.IdleRSS <= 0 || len(r.Rounds) != o.rounds {
			t.Errorf("%s %s: initial sync %v, idle RSS %d, %d rounds", r.Server, r.Mode, r.InitialSync, r.IdleRSS, len(r.Rounds))
		}
		for _, rr := range r.Rounds {
			if rr.Updated != o.clients || rr.Max <= 0 || rr.Min > rr.Max || rr.Commit <= 0 || rr.Bytes <= 0 {
				t.Errorf("%s %s round %d: %d of %d clients updated, first %v, max %v, change made in %v, %d bytes",
					r.Server, r.Mode, rr.Gen, rr.Updated, o.clients, rr.Min, rr.Max, rr.Commit, rr.Bytes)
			}
		}
	}
	var out bytes.Buffer
	for _, mode := range o.modes {
		printTable(&out, o, mode, results)
	}
	updated := fmt.Sprintf("%d/%d", o.clients*o.rounds*o.passes, o.clients*o.rounds*o.passes)
	for _, want := range []string{"xdsd (dir)", lib, "gcp-linear", "floor", "linear ÷ xdsd", updated} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}
