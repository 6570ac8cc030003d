// Package xdsctl implements the xdsctl command: watch and get resources
// from any xDS server, read xdsd's admin endpoints (status, dump), and
// validate a configuration directory offline. Each command is a function
// of its arguments, output streams and a context, so tests run it in
// process; cmd/xdsctl only wires it to os.Args and signals.
package xdsctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

// Version is xdsctl's version; when empty, the module version from the
// build information is used. Set it with
// -ldflags "-X github.com/xdsd/xdsd/internal/app/xdsctl.Version=...".
var Version = ""

// Exit statuses.
const (
	exitOK    = 0 // success
	exitFail  = 1 // the command ran and the answer is "no" (missing, invalid, unreachable)
	exitUsage = 2 // bad command line
)

const usage = `xdsctl: look at what an xDS control plane serves.

Usage:
  xdsctl <command> [flags] [arguments]

Commands against any xDS server (gRPC, ADS or per-type, SotW or incremental):
  watch     stream updates of resources as they change, ACKing each
  get       fetch resources once; fails if any named resource does not exist

Commands against xdsd's admin endpoint (--admin, default 127.0.0.1:19000):
  status    per node and type: SYNCED, NOT SENT, STALE or NACKED, with NACK messages
  dump      the resources a node is served

Commands against xdsd's store in etcd (--etcd-endpoints):
  apply     write files, checked first with the server's loader, in one step
  delete    delete files, checked likewise
  replicas  the live replicas and the revision each has read

Offline:
  validate  load a configuration directory as xdsd would and list every problem
  version   print xdsctl's version

Examples:
  xdsctl get --server localhost:18000 --type cds            # every cluster
  xdsctl get --server localhost:18000 --type eds hello      # the endpoints of cluster hello
  xdsctl watch --server localhost:18000 --type lds --output json
  xdsctl status
  xdsctl dump --node envoy-1
  xdsctl validate ./config
  xdsctl apply --etcd-endpoints http://127.0.0.1:2379 --wait ./config

Run 'xdsctl <command> --help' for a command's flags and more examples.
`

// Run runs xdsctl with the command-line arguments args (without the
// program name) and returns the exit status: 0 on success, 1 when the
// command ran but failed (a missing resource, an invalid configuration, an
// unreachable server), 2 for a bad command line. ctx ends long-running
// commands (watch) and bounds the others.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "watch":
		return Watch(ctx, rest, stdout, stderr)
	case "get":
		return Get(ctx, rest, stdout, stderr)
	case "status":
		return Status(ctx, rest, stdout, stderr)
	case "dump":
		return Dump(ctx, rest, stdout, stderr)
	case "validate":
		return Validate(rest, stdout, stderr)
	case "apply":
		return Apply(ctx, rest, stdout, stderr)
	case "delete":
		return Delete(ctx, rest, stdout, stderr)
	case "replicas":
		return Replicas(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "xdsctl", versionString())
		return exitOK
	case "help", "-h", "--help", "-help":
		if len(rest) > 0 && rest[0] != "help" {
			return Run(ctx, []string{rest[0], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "xdsctl: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
}

func versionString() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// flagSet is a command's flag set with its help text.
type flagSet struct {
	*flag.FlagSet
	help string // usage line, description and examples
}

// newFlagSet returns a flag set for a command. A bad flag prints the error
// and a pointer to --help on stderr; --help prints help and the flags.
func newFlagSet(name, help string, stderr io.Writer) *flagSet {
	fs := flag.NewFlagSet("xdsctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "Run 'xdsctl %s --help' for usage.\n", name) }
	return &flagSet{FlagSet: fs, help: help}
}

// parseNoArgs is parse for a command that takes flags only: arguments
// beyond them are a usage error, reported on stderr.
func parseNoArgs(fs *flagSet, args []string, stdout, stderr io.Writer) (done bool, code int) {
	rest, done, code := parse(fs, args, stdout)
	if done {
		return true, code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), rest)
		return true, exitUsage
	}
	return false, 0
}

// parse parses args with fs. On --help it prints the usage to stdout and
// returns done with status 0; on a bad flag, the usage went to stderr and
// it returns done with status 2. Flags may follow arguments
// ("get --type cds a b --output json").
func parse(fs *flagSet, args []string, stdout io.Writer) (rest []string, done bool, code int) {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stdout, fs.help)
			hasFlags := false
			fs.VisitAll(func(*flag.Flag) { hasFlags = true })
			if hasFlags {
				fmt.Fprintln(stdout, "\nFlags:")
				fs.SetOutput(stdout)
				fs.PrintDefaults()
			}
			return nil, true, exitOK
		}
		if a == "--" {
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, true, exitOK
			}
			return nil, true, exitUsage
		}
		args = fs.Args()
		// Take positional arguments up to the next flag; "--" ends flags.
		i := 0
		for i < len(args) && (len(args[i]) < 2 || args[i][0] != '-') {
			i++
		}
		pos = append(pos, args[:i]...)
		args = args[i:]
		if len(args) == 0 {
			return pos, false, exitOK
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), false, exitOK
		}
	}
}
