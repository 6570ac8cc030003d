package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Names of the servers under test, in the order they run and are printed.
const (
	srvXDSDDir     = "xdsd-dir"
	srvXDSDLib     = "xdsd-lib"
	srvXDSDLibGRPC = "xdsd-lib-grpc"
	srvGCPSnapshot = "gcp-snapshot"
	srvGCPLinear   = "gcp-linear"
	srvFloor       = "floor"
	srvXDSDEtcd    = "xdsd-etcd"
)

// defaultServers are the servers run without -servers; knownServers are all
// of them (floor only on demand: it is a reference, not a contender).
var (
	defaultServers = []string{srvXDSDDir, srvXDSDLib, srvGCPSnapshot, srvGCPLinear}
	knownServers   = []string{srvXDSDDir, srvXDSDEtcd, srvXDSDLib, srvXDSDLibGRPC, srvGCPSnapshot, srvGCPLinear, srvFloor}
)

// serverTitles are the column titles of the servers.
var serverTitles = map[string]string{
	srvXDSDDir:     "xdsd (dir)",
	srvXDSDLib:     "xdsd (lib)",
	srvXDSDLibGRPC: "xdsd (lib, grpc-go)",
	srvGCPSnapshot: "gcp-snapshot",
	srvGCPLinear:   "gcp-linear",
	srvFloor:       "floor",
	srvXDSDEtcd:    "xdsd (etcd ×3)",
}

// env is what starting a server needs.
type env struct {
	workDir   string   // scratch directory of this run
	xdsdBin   string   // the xdsd binary
	xdsdFlags []string // more flags of xdsd serve (-xdsd-flags)
	self      string   // this program, re-executed for serve-* subcommands
	clusters  int
	endpoints int
	inPlace   bool // xdsd-dir: endpoint files rewritten in place (-in-place)
	// rewriteAll: xdsd-dir: every endpoint file rewritten in each change
	// (-rewrite-all).
	rewriteAll bool
	log        func(format string, args ...any)
}

// running is a started server under test.
type running struct {
	proc    *proc
	xdsAddr string
	// replicas, for a server of several replicas (proc is the first), are
	// the processes whose CPU and memory count, and xdsAddrs their
	// addresses, which the clients are spread over; infra are processes
	// that serve them (etcd), stopped last.
	replicas []*proc
	xdsAddrs []string
	infra    []*proc
	onStop   func() // if set, run once every process has stopped
	// replicaPprof are the replicas' base URLs of /debug/pprof/, by replica.
	replicaPprof []string
	// pprofBase is the base URL of the server's /debug/pprof/.
	pprofBase string
	// stage prepares generation gen of the endpoint sets idx and returns the
	// call that makes the change: for xdsd-dir, the temporary files are
	// written and commit renames them (or commit writes the files in place,
	// with -in-place); otherwise commit is the control call.
	stage func(ctx context.Context, gen int, idx []int) (commit func() error, err error)
}

// all returns the server's processes whose CPU and memory count.
func (r *running) all() []*proc {
	if len(r.replicas) > 0 {
		return r.replicas
	}
	if r.proc == nil {
		return nil
	}
	return []*proc{r.proc}
}

// addrs returns the addresses clients connect to.
func (r *running) addrs() []string {
	if len(r.xdsAddrs) > 0 {
		return r.xdsAddrs
	}
	return []string{r.xdsAddr}
}

// pids returns the process ids of all.
func (r *running) pids() []int {
	var out []int
	for _, p := range r.all() {
		out = append(out, p.pid())
	}
	return out
}

// cpuTicks returns the CPU all have used, in clock ticks.
func (r *running) cpuTicks() (int64, error) {
	var sum int64
	for _, p := range r.all() {
		t, err := cpuTicks(p.pid())
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// memStatus returns the resident and peak resident memory of all, added
// up.
func (r *running) memStatus() (rss, hwm int64, err error) {
	for _, p := range r.all() {
		a, b, err := memStatus(p.pid())
		if err != nil {
			return 0, 0, err
		}
		rss, hwm = rss+a, hwm+b
	}
	return rss, hwm, nil
}

// stop stops every process of the server, infra last.
func (r *running) stop(grace time.Duration) {
	for _, p := range r.all() {
		p.stop(grace)
	}
	for _, p := range r.infra {
		p.stop(grace)
	}
	if r.onStop != nil {
		r.onStop()
	}
}

// startServer starts the server called name and waits until it serves the
// initial configuration.
func startServer(ctx context.Context, e env, name string, readyTimeout time.Duration) (*running, error) {
	switch name {
	case srvXDSDDir:
		return startXDSDDir(ctx, e, readyTimeout)
	case srvXDSDEtcd:
		return startXDSDEtcd(ctx, e, readyTimeout)
	case srvXDSDLib:
		return startSelf(ctx, e, name, []string{"serve-xdsd-lib"}, readyTimeout)
	case srvXDSDLibGRPC:
		return startSelf(ctx, e, name, []string{"serve-xdsd-lib", "-transport", "grpc-go"}, readyTimeout)
	case srvGCPSnapshot:
		return startSelf(ctx, e, name, []string{"serve-gcp", "--cache", "snapshot"}, readyTimeout)
	case srvGCPLinear:
		return startSelf(ctx, e, name, []string{"serve-gcp", "--cache", "linear"}, readyTimeout)
	case srvFloor:
		return startSelf(ctx, e, name, []string{"serve-floor"}, readyTimeout)
	}
	return nil, fmt.Errorf("unknown server %q (known: %s)", name, strings.Join(knownServers, ", "))
}

// startXDSDDir lays out a configuration directory and runs `xdsd serve` on
// it.
func startXDSDDir(ctx context.Context, e env, readyTimeout time.Duration) (*running, error) {
	dir := filepath.Join(e.workDir, "config")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := writeConfigDir(dir, e.clusters, e.endpoints); err != nil {
		return nil, fmt.Errorf("writing the configuration directory: %w", err)
	}
	xdsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	adminAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--config-dir", dir, "--xds-addr", xdsAddr, "--admin-addr", adminAddr, "--shutdown-grace", "1s"}, e.xdsdFlags...)
	e.log("starting %s %s", e.xdsdBin, strings.Join(args, " "))
	p, err := startProc(srvXDSDDir, e.xdsdBin, args, filepath.Join(e.workDir, srvXDSDDir+".log"), nil)
	if err != nil {
		return nil, err
	}
	if err := pollHTTP(ctx, p, "http://"+adminAddr+"/readyz", readyTimeout); err != nil {
		p.stop(time.Second)
		return nil, err
	}
	r := &running{proc: p, xdsAddr: xdsAddr, pprofBase: "http://" + adminAddr}
	r.stage = dirStager(dir, e)
	return r, nil
}

// dirStager returns the stage function of a configuration directory dir
// laid out by writeConfigDir, with e's endpoint sets.
func dirStager(dir string, e env) func(ctx context.Context, gen int, idx []int) (func() error, error) {
	gens := make([]int, e.clusters) // each endpoint set's generation on disk
	return func(_ context.Context, gen int, idx []int) (func() error, error) {
		for _, i := range idx {
			gens[i] = gen
		}
		if e.rewriteAll {
			idx = rewriteOrder(idx, e.clusters)
		}
		puts := make([]func() error, 0, len(idx))
		for _, i := range idx {
			put, err := stageCLA(dir, i, e.endpoints, gens[i], e.inPlace)
			if err != nil {
				return nil, err
			}
			puts = append(puts, put)
		}
		return func() error {
			for _, put := range puts {
				if err := put(); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}
}

// rewriteOrder is the order in which a change of the endpoint sets
// changed rewrites all n of them: the others first, the changed ones last,
// so that the change waits for them all.
func rewriteOrder(changed []int, n int) []int {
	order := make([]int, 0, n)
	for i := range n {
		if !slices.Contains(changed, i) {
			order = append(order, i)
		}
	}
	return append(order, changed...)
}

// startSelf runs this program's serve-* subcommand sub and uses its control
// endpoint for changes.
func startSelf(ctx context.Context, e env, name string, sub []string, readyTimeout time.Duration) (*running, error) {
	args := append(sub, "--xds-addr", "127.0.0.1:0", "--control-addr", "127.0.0.1:0",
		"--clusters", strconv.Itoa(e.clusters), "--endpoints", strconv.Itoa(e.endpoints))
	e.log("starting %s %s", e.self, strings.Join(args, " "))
	p, err := startProc(name, e.self, args, filepath.Join(e.workDir, name+".log"), nil)
	if err != nil {
		return nil, err
	}
	line, err := p.waitReady(ctx, readyTimeout)
	if err != nil {
		p.stop(time.Second)
		return nil, err
	}
	var xdsAddr, control string
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, "xds="); ok {
			xdsAddr = v
		} else if v, ok := strings.CutPrefix(f, "control="); ok {
			control = v
		}
	}
	if xdsAddr == "" || control == "" {
		p.stop(time.Second)
		return nil, fmt.Errorf("%s: malformed ready line %q", name, line)
	}
	r := &running{proc: p, xdsAddr: xdsAddr, pprofBase: "http://" + control}
	r.stage = func(ctx context.Context, gen int, idx []int) (func() error, error) {
		s := make([]string, len(idx))
		for j, i := range idx {
			s[j] = strconv.Itoa(i)
		}
		url := fmt.Sprintf("http://%s/change?gen=%d&idx=%s", control, gen, strings.Join(s, ","))
		return func() error {
			resp, err := call(ctx, http.MethodPost, url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusNoContent {
				return fmt.Errorf("%s: change: %s: %s", name, resp.Status, body)
			}
			return nil
		}, nil
	}
	return r, nil
}

// buildXDSD builds the xdsd command into dir and returns the binary's path.
// It finds the xdsd module's directory with `go list -m` (from the bench
// module, the directory its replace directive names), so it runs from
// anywhere in either module, and builds there with the xdsd module's own
// go.sum.
func buildXDSD(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/xdsd/xdsd").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/xdsd/xdsd (run xdsbench from the xdsd or bench module, or pass -xdsd-bin): %w", err)
	}
	bin := filepath.Join(dir, "xdsd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/xdsd")
	cmd.Dir = strings.TrimSpace(string(out))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/xdsd in %s: %v\n%s", cmd.Dir, err, b)
	}
	return bin, nil
}
