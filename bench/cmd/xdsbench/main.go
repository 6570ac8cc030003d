// Command xdsbench measures xDS management servers the way a fleet of Envoys
// uses them: it opens N real ADS streams (state of the world or
// incremental, one gRPC connection each by default), each subscribing like
// Envoy (CDS wildcard, then EDS for every cluster it learns) and ACKing every
// response; then it changes K endpoint sets, round after round, and measures
// how long until every client holds the new content, what the clients
// received and what the server spent.
//
// The servers under test run as child processes on loopback, started and
// stopped by xdsbench in the same invocation:
//
//	xdsd-dir      the real `xdsd serve --config-dir DIR`, with one file per
//	              cluster and one per endpoint set; a change writes a
//	              temporary ".name" file and renames it into place
//	xdsd-lib      xdsd as a library on its own transport, as xdsd serve (`xdsbench serve-xdsd-lib`)
//	xdsd-lib-grpc the same on grpc-go's transport (`xdsbench serve-xdsd-lib -transport grpc-go`)
//	gcp-snapshot  go-control-plane v0.14 SnapshotCache (`xdsbench serve-gcp --cache snapshot`)
//	gcp-linear    go-control-plane v0.14 LinearCache per type (`xdsbench serve-gcp --cache linear`)
//	floor         only with -servers: the least a grpc-go xDS server can do for
//	              this scenario (`xdsbench serve-floor`), the floor set by grpc-go
//
// The serve-* subcommands take changes on a loopback control endpoint
// (POST /change?gen=G&idx=I,J) and serve /debug/pprof/ there; xdsd serves it
// on its admin address.
//
// Usage:
//
//	xdsbench [flags]                 run the scenario against every server
//	xdsbench serve-xdsd-lib [flags]  (internal) a server under test
//	xdsbench serve-gcp [flags]       (internal) a server under test
//	xdsbench serve-floor [flags]     (internal) a server under test
//
// See docs/performance.md at the root of the repository for the scenarios,
// the commands and the numbers.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand named by args[0], or the benchmark.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "serve-xdsd-lib":
			return serveXDSDLib(args[1:], stderr)
		case "serve-gcp":
			return serveGCP(args[1:], stderr)
		case "serve-floor":
			return serveFloor(args[1:], stderr)
		}
	}
	opts, code := parseFlags(args, stderr)
	if opts == nil {
		return code
	}
	return runMain(*opts, stdout, stderr)
}

// isServeSubcommand reports whether args start a serve-* subcommand.
func isServeSubcommand(args []string) bool {
	return len(args) > 0 && (args[0] == "serve-xdsd-lib" || args[0] == "serve-gcp" || args[0] == "serve-floor")
}

// fail prints an error and returns exit code 1.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "xdsbench:", err)
	return 1
}
