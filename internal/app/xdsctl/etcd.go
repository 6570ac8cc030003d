package xdsctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/source/configdir"
	"github.com/xdsd/xdsd/source/etcdstore"
)

// Exit statuses of the commands that write to etcd, beyond exitOK,
// exitFail (the change was refused: the problems are printed) and
// exitUsage.
const (
	exitConflict    = 3 // --if-revision: the configuration changed since
	exitUnavailable = 4 // etcd could not be reached, or failed
	exitWaitTimeout = 5 // --wait: some replica had not read the change in time
)

const applyHelp = `Usage: xdsctl apply --etcd-endpoints URL[,URL...] [flags] PATH...

Writes configuration files to xdsd's store in etcd, which every replica
(xdsd serve --etcd-endpoints) reads. A directory's files go under their
paths relative to it; a file, under its path as given (relative, without
..). The change is first loaded with the server's own loader on top of the
configuration in force: if xdsd would reject the result, every problem is
printed as "file: resource: reason" and nothing is written (exit 1).
Otherwise it is committed at once: every replica goes from the
configuration before to the result whole, however many files the change
holds. Prints the revision of the commit.

Exit status: 0 written (or nothing to change), 1 refused, 2 bad command
line, 3 --if-revision conflict, 4 etcd unreachable or failing, 5 --wait
timed out.

Examples:
  xdsctl apply --etcd-endpoints http://127.0.0.1:2379 ./config
  xdsctl apply --etcd-endpoints http://127.0.0.1:2379 --prune --wait ./config   # mirror the directory
  rev=$(xdsctl apply ... ./a) && xdsctl apply ... --if-revision "$rev" ./b      # fails if someone wrote between
`

const deleteHelp = `Usage: xdsctl delete --etcd-endpoints URL[,URL...] [flags] PATH...

Deletes files from xdsd's store in etcd: each PATH is a file's path in the
configuration, or a directory's, ending in /, for every file under it. As
with apply, the result is checked first (deleting a cluster that a route
still names is refused), then committed at once. Exit status as apply's.

Examples:
  xdsctl delete --etcd-endpoints http://127.0.0.1:2379 endpoints/old.yaml
  xdsctl delete --etcd-endpoints http://127.0.0.1:2379 --wait tenants/acme/
`

const replicasHelp = `Usage: xdsctl replicas --etcd-endpoints URL[,URL...] [flags]

Lists the live replicas registered in etcd: name, the revision of the
configuration each has read (and whether it rejected it), its streams and
its addresses.

Examples:
  xdsctl replicas --etcd-endpoints http://127.0.0.1:2379
`

// etcdFlags are the flags that reach xdsd's store.
type etcdFlags struct {
	endpoints, prefix, ca, cert, key string
	timeout                          time.Duration
}

func (f *etcdFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoints, "etcd-endpoints", "", "comma-separated etcd client URLs (required)")
	fs.StringVar(&f.prefix, "etcd-prefix", etcdstore.DefaultPrefix, "prefix of xdsd's keys")
	fs.StringVar(&f.ca, "etcd-ca", "", "PEM CA bundle for TLS to etcd")
	fs.StringVar(&f.cert, "etcd-cert", "", "PEM client certificate for TLS to etcd")
	fs.StringVar(&f.key, "etcd-key", "", "PEM private key for --etcd-cert")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long")
}

// client returns a client of the store, or prints why not.
func (f *etcdFlags) client(name string, stderr io.Writer) (*clientv3.Client, int) {
	var eps []string
	for _, e := range strings.Split(f.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		fmt.Fprintf(stderr, "xdsctl %s: --etcd-endpoints is required\n", name)
		return nil, exitUsage
	}
	cli, err := etcdstore.NewClient(etcdstore.ClientConfig{Endpoints: eps, CA: f.ca, Cert: f.cert, Key: f.key})
	if err != nil {
		fmt.Fprintf(stderr, "xdsctl %s: %v\n", name, err)
		return nil, exitUnavailable
	}
	return cli, exitOK
}

// Apply is `xdsctl apply`.
func Apply(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return write(ctx, "apply", applyHelp, args, stdout, stderr)
}

// Delete is `xdsctl delete`.
func Delete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return write(ctx, "delete", deleteHelp, args, stdout, stderr)
}

// write is apply and delete.
func write(ctx context.Context, name, help string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(name, help, stderr)
	var ef etcdFlags
	ef.register(fs.FlagSet)
	ifRev := fs.Int64("if-revision", 0, "fail (exit 3) if the configuration changed after this revision")
	wait := fs.Bool("wait", false, "return once every live replica has read the change (exit 5 if not within --timeout)")
	prune := false
	if name == "apply" {
		fs.BoolVar(&prune, "prune", false, "delete the files that the paths given do not hold: the store then mirrors them")
	}
	rest, done, code := parse(fs, args, stdout)
	if done {
		return code
	}
	if len(rest) == 0 {
		fmt.Fprintf(stderr, "xdsctl %s: want at least one path; see xdsctl %s --help\n", name, name)
		return exitUsage
	}
	ch := etcdstore.Change{Prune: prune, IfRevision: *ifRev}
	if name == "apply" {
		files, err := readPaths(rest)
		if err != nil {
			fmt.Fprintf(stderr, "xdsctl apply: %v\n", err)
			return exitFail
		}
		ch.Files = files
	} else {
		ch.Delete = rest
	}
	cli, code := ef.client(name, stderr)
	if cli == nil {
		return code
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, ef.timeout)
	defer cancel()
	a, err := etcdstore.Apply(ctx, cli, ef.prefix, ch)
	if code, failed := writeFailed(name, err, stdout, stderr); failed {
		return code
	}
	if a.Written+a.Deleted == 0 {
		fmt.Fprintf(stdout, "unchanged: revision %d\n", a.Revision)
	} else {
		how := ""
		if a.NewGeneration {
			how = fmt.Sprintf(" as generation %s", a.Generation)
		}
		fmt.Fprintf(stdout, "revision %d: %d file(s) written, %d deleted%s\n", a.Revision, a.Written, a.Deleted, how)
	}
	if !*wait {
		return exitOK
	}
	rs, err := etcdstore.WaitApplied(ctx, cli, ef.prefix, a.Revision, 100*time.Millisecond)
	if err != nil {
		fmt.Fprintf(stderr, "xdsctl %s --wait: %v\n", name, err)
		printReplicas(stderr, rs)
		return exitWaitTimeout
	}
	rejected := 0
	for _, r := range rs {
		if r.Error != "" {
			rejected++
		}
	}
	fmt.Fprintf(stdout, "read by all %d replica(s)\n", len(rs))
	if rejected > 0 {
		fmt.Fprintf(stderr, "xdsctl %s --wait: %d replica(s) rejected the configuration:\n", name, rejected)
		printReplicas(stderr, rs)
		return exitFail
	}
	return exitOK
}

// writeFailed prints why a write failed, if it did, and returns the exit
// status.
func writeFailed(name string, err error, stdout, stderr io.Writer) (int, bool) {
	if err == nil {
		return exitOK, false
	}
	if cerr, ok := errors.AsType[*configdir.Error](err); ok {
		for _, p := range cerr.Problems {
			fmt.Fprintln(stdout, p.String())
		}
		fmt.Fprintf(stderr, "xdsctl %s: %d problem(s); xdsd would reject the result, nothing was written\n", name, len(cerr.Problems))
		return exitFail, true
	}
	if _, ok := errors.AsType[*etcdstore.ConflictError](err); ok {
		fmt.Fprintf(stderr, "xdsctl %s: %v; nothing was written\n", name, err)
		return exitConflict, true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "xdsctl %s: etcd did not answer in time: %v\n", name, err)
		return exitUnavailable, true
	}
	fmt.Fprintf(stderr, "xdsctl %s: %v\n", name, err)
	if _, ok := errors.AsType[*etcdstore.ChangeError](err); ok {
		return exitFail, true
	}
	return exitUnavailable, true
}

// readPaths reads the files of the paths given to apply: a directory's
// configuration files by their paths relative to it, a file by its path
// as given.
func readPaths(paths []string) (map[string][]byte, error) {
	files := make(map[string][]byte)
	add := func(rel, from string) error {
		rel = filepath.ToSlash(filepath.Clean(rel))
		if _, dup := files[rel]; dup {
			return fmt.Errorf("%s: given twice", rel)
		}
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		files[rel] = b
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			if filepath.IsAbs(p) {
				return nil, fmt.Errorf("%s: a file is written under its path as given, which must be relative (or give its directory)", p)
			}
			if err := add(p, p); err != nil {
				return nil, err
			}
			continue
		}
		rels, err := configdir.ConfigFiles(os.DirFS(p))
		if err != nil {
			return nil, err
		}
		for _, rel := range rels {
			if err := add(rel, filepath.Join(p, filepath.FromSlash(rel))); err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

// Replicas is `xdsctl replicas`.
func Replicas(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replicas", replicasHelp, stderr)
	var ef etcdFlags
	ef.register(fs.FlagSet)
	if done, code := parseNoArgs(fs, args, stdout, stderr); done {
		return code
	}
	cli, code := ef.client("replicas", stderr)
	if cli == nil {
		return code
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, ef.timeout)
	defer cancel()
	rs, err := etcdstore.Replicas(ctx, cli, ef.prefix)
	if err != nil {
		fmt.Fprintf(stderr, "xdsctl replicas: %v\n", err)
		return exitUnavailable
	}
	printReplicas(stdout, rs)
	return exitOK
}

// printReplicas prints registrations as a table.
func printReplicas(w io.Writer, rs []etcdstore.Registration) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREVISION\tSTATE\tSTREAMS\tXDS\tADMIN\tSTARTED")
	for _, r := range rs {
		state := "APPLIED"
		if r.Error != "" {
			state = "REJECTED"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Name, r.Revision, state, r.Streams,
			r.Addresses["xds"], r.Addresses["admin"], r.Started.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
}
