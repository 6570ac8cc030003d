package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the flags of a benchmark run.
type options struct {
	servers        []string
	modes          []string // "sotw", "delta"
	clients        int
	clusters       int
	endpoints      int
	changes        int // K: endpoint sets changed per round
	rounds         int
	client         string // "grpc" or "h2": see fleetConfig
	node           string // nodeMinimal or nodeEnvoy
	repeatNode     bool
	failover       bool // servers of several replicas: kill one at the end, time its clients' resumption
	inPlace        bool // xdsd-dir: rewrite endpoint files in place, not renamed into place
	rewriteAll     bool // xdsd-dir: rewrite every endpoint file in each change, the K changed ones and the others byte-identical
	streamsPerConn int
	readBuffer     int
	writeBuffer    int
	window         int
	timeout        time.Duration // the whole run
	readyTimeout   time.Duration
	syncTimeout    time.Duration
	roundTimeout   time.Duration
	quiet          time.Duration // how long nothing moves before a round is over
	quietTimeout   time.Duration
	xdsdBin        string
	xdsdFlags      string // more flags of xdsd serve, space-separated
	workDir        string
	keep           bool
	pprofDir       string
	pprofSeconds   int
	jsonPath       string
	verbose        bool
	// warmup runs one unmeasured initial sync before the first measured
	// server (see warmUp).
	warmup bool
	// passes runs the list of servers this many times per mode, each pass
	// starting one server further along (see passOrder); the table shows
	// each figure's median over the passes.
	passes int
}

// defaultOptions are the flag defaults, sized for 2 cores.
func defaultOptions() options {
	return options{
		servers:        defaultServers,
		modes:          []string{"delta"},
		clients:        1000,
		clusters:       1000,
		endpoints:      4,
		changes:        1,
		rounds:         5,
		client:         clientGRPC,
		node:           nodeMinimal,
		streamsPerConn: 1,
		readBuffer:     16 << 10,
		writeBuffer:    32 << 10, // grpc-go's default
		window:         64 << 10,
		timeout:        5 * time.Minute,
		readyTimeout:   time.Minute,
		syncTimeout:    2 * time.Minute,
		roundTimeout:   time.Minute,
		quiet:          300 * time.Millisecond,
		quietTimeout:   20 * time.Second,
		pprofSeconds:   10,
		warmup:         true,
		passes:         1,
	}
}

const usageText = `Usage: xdsbench [flags]

Starts each server under test (-servers) as a child process on 127.0.0.1, opens
-clients Envoy-like ADS streams to it, waits until every client holds every
cluster and endpoint set, then runs -rounds rounds: change -changes endpoint
sets, wait until every client holds them. Prints, per mode, a table of every
figure for every server and the ratio go-control-plane / xdsd (dir).

Flags:
`

// parseFlags parses the benchmark's flags. It returns nil and an exit code
// if the run should not go on.
func parseFlags(args []string, stderr io.Writer) (*options, int) {
	o := defaultOptions()
	fs := flag.NewFlagSet("xdsbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.String("servers", strings.Join(defaultServers, ","), "servers under test, comma-separated: "+strings.Join(knownServers, ", "))
	mode := fs.String("mode", "delta", "ADS variant: sotw, delta, or both as sotw,delta")
	fs.IntVar(&o.clients, "clients", o.clients, "number of clients (ADS streams)")
	fs.IntVar(&o.clusters, "clusters", o.clusters, "number of clusters, each with one endpoint set")
	fs.IntVar(&o.endpoints, "endpoints", o.endpoints, "endpoints per endpoint set")
	fs.IntVar(&o.changes, "changes", o.changes, "endpoint sets changed per round (K); the others stay byte-identical")
	fs.IntVar(&o.rounds, "rounds", o.rounds, "measured rounds (changes) per server")
	fs.StringVar(&o.client, "client", o.client, "the clients' HTTP/2 and gRPC: grpc (grpc-go's client) or h2 (a minimal one on each client's goroutine,\nwhich takes less of the CPU shared with the server; one stream per connection)")
	fs.StringVar(&o.node, "node", o.node, "the clients' node: minimal (an id and a cluster) or envoy (also the user agent, build, client features\nand ~300 extensions, some 40 KB, as an Envoy sends)")
	fs.BoolVar(&o.failover, "failover", false, "for a server of several replicas (xdsd-etcd), delta mode: after the rounds, kill the first\nreplica (SIGKILL) and time until each of its clients, resuming on the next with\ninitial_resource_versions, has its first response there, and what they receive")
	fs.BoolVar(&o.repeatNode, "repeat-node", false, "send the node in every request, as an Envoy does unless its config source sets\nset_node_on_first_message_only (default: in the first request only)")
	fs.BoolVar(&o.inPlace, "in-place", false, "xdsd-dir: rewrite each changed endpoint file in place (truncate, write, close), as cp or a shell\nredirection does (default: write a temporary file, then rename it into place)")
	fs.BoolVar(&o.rewriteAll, "rewrite-all", false, "xdsd-dir: each change rewrites every endpoint file, the K changed and the others with the bytes they hold,\nas a generator that writes the whole directory does; the change's time starts before the first file")
	fs.IntVar(&o.streamsPerConn, "streams-per-conn", o.streamsPerConn, "ADS streams multiplexed on one gRPC connection (1: one connection per client, like Envoy)")
	fs.IntVar(&o.readBuffer, "read-buffer", o.readBuffer, "client gRPC read buffer per connection, bytes")
	fs.IntVar(&o.writeBuffer, "write-buffer", o.writeBuffer, "client gRPC write buffer per connection, bytes")
	fs.IntVar(&o.window, "window", o.window, "client HTTP/2 initial stream window, bytes (at least 65535); 0: grpc-go's default, "+
		"which sizes the windows by pinging the server each time data arrives (grpc clients only)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run; then everything stops")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", o.readyTimeout, "bound on a server's start")
	fs.DurationVar(&o.syncTimeout, "sync-timeout", o.syncTimeout, "bound on the initial sync of all clients")
	fs.DurationVar(&o.roundTimeout, "round-timeout", o.roundTimeout, "bound on one round")
	fs.DurationVar(&o.quiet, "quiet", o.quiet, "a round ends (for bytes and CPU) once neither client bytes nor server CPU moved for this long")
	fs.DurationVar(&o.quietTimeout, "quiet-timeout", o.quietTimeout, "bound on waiting for quiet")
	fs.StringVar(&o.xdsdFlags, "xdsd-flags", "", "more flags of xdsd serve for xdsd-dir and xdsd-etcd, space-separated (e.g. \"--stream-rate 500 --stream-burst 100\")")
	fs.StringVar(&o.xdsdBin, "xdsd-bin", "", "xdsd binary; empty: go build github.com/xdsd/xdsd/cmd/xdsd into the work directory")
	fs.StringVar(&o.workDir, "work-dir", "", "scratch directory (config directory, logs); empty: a new temporary directory")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory")
	fs.StringVar(&o.pprofDir, "pprof", "", "write profiles of each server into DIR: the CPU for -pprof-seconds from the start of the initial sync\n(<server>-<mode>-sync.pprof), the heap with the clients idle (<server>-<mode>-heap.pprof) and,\nafter the measured rounds, the CPU for -pprof-seconds while changes run back to back (<server>-<mode>.pprof)")
	fs.IntVar(&o.pprofSeconds, "pprof-seconds", o.pprofSeconds, "length of the CPU profile")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.BoolVar(&o.verbose, "v", false, "log progress and every round to stderr")
	fs.IntVar(&o.passes, "passes", o.passes, "run the servers this many times per mode, each pass starting one server further along the list\n"+
		"(so that no server is always measured first or last); the table shows each figure's median over the passes")
	fs.BoolVar(&o.warmup, "warmup", o.warmup, "first run one unmeasured initial sync against the first server (a fresh process of it), so that\n"+
		"this process's heap and stacks have grown before any measured server: without it the first server pays for that growth\n"+
		"in its initial sync (0.4 s of 3 s at 1,000 clients × 1,000 clusters)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "xdsbench: unexpected arguments %q\n", fs.Args())
		return nil, 2
	}
	o.servers = splitList(*servers)
	o.modes = splitList(*mode)
	if err := o.check(); err != nil {
		fmt.Fprintln(stderr, "xdsbench:", err)
		return nil, 2
	}
	return &o, 0
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// check validates the options.
func (o *options) check() error {
	for _, s := range o.servers {
		if !slices.Contains(knownServers, s) {
			return fmt.Errorf("-servers: unknown server %q (known: %s)", s, strings.Join(knownServers, ", "))
		}
	}
	for _, m := range o.modes {
		if m != "sotw" && m != "delta" {
			return fmt.Errorf("-mode: %q is not sotw or delta", m)
		}
	}
	switch {
	case len(o.servers) == 0 || len(o.modes) == 0:
		return errors.New("no server or no mode")
	case o.clients < 1 || o.clusters < 1 || o.endpoints < 1 || o.rounds < 0 || o.streamsPerConn < 1 || o.passes < 1:
		return errors.New("-clients, -clusters, -endpoints, -streams-per-conn and -passes must be at least 1, -rounds at least 0")
	case o.window != 0 && (o.window < 65535 || o.window > 1<<31-1):
		return errors.New("-window must be 0 or between 65535 and 2147483647")
	case o.window == 0 && o.client == clientH2:
		return errors.New("-window 0 is for grpc clients")
	case o.client != clientGRPC && o.client != clientH2:
		return fmt.Errorf("-client: %q is not %s or %s", o.client, clientGRPC, clientH2)
	case o.node != nodeMinimal && o.node != nodeEnvoy:
		return fmt.Errorf("-node: %q is not %s or %s", o.node, nodeMinimal, nodeEnvoy)
	case o.client == clientH2 && o.streamsPerConn != 1:
		return errors.New("-client h2 opens one stream per connection: -streams-per-conn must be 1")
	case o.changes < 1 || o.changes > o.clusters:
		return fmt.Errorf("-changes must be between 1 and -clusters (%d)", o.clusters)
	case o.endpoints > 250:
		return errors.New("-endpoints must be at most 250")
	}
	return nil
}

// runMain runs the benchmark and prints the tables.
func runMain(o options, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	logf := func(format string, args ...any) {
		if o.verbose {
			fmt.Fprintf(stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
		}
	}
	results, err := run(ctx, o, logf)
	for _, mode := range o.modes {
		printTable(stdout, o, mode, results)
	}
	if o.jsonPath != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if werr := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fail(stderr, err)
	}
	for _, r := range results {
		if r.Err != "" {
			fmt.Fprintf(stderr, "xdsbench: %s %s: %s\n", r.Server, r.Mode, r.Err)
		}
	}
	if failed(results) {
		return 1
	}
	return 0
}

// failed reports whether any server failed its scenario.
func failed(results []*result) bool {
	for _, r := range results {
		if r.Err != "" {
			return true
		}
	}
	return false
}

// run prepares the work directory and the xdsd binary, then runs every mode
// against every server, one at a time. A server that fails is reported in
// its result; run returns an error only if nothing can run.
func run(ctx context.Context, o options, logf func(string, ...any)) ([]*result, error) {
	if lim, err := raiseNoFile(); err != nil {
		logf("RLIMIT_NOFILE: %v", err)
	} else if lim < uint64(o.clients)+64 {
		logf("RLIMIT_NOFILE is %d: too low for %d connections", lim, o.clients)
	}
	defer httpClient.CloseIdleConnections()
	e := env{clusters: o.clusters, endpoints: o.endpoints, inPlace: o.inPlace, rewriteAll: o.rewriteAll, log: logf, xdsdBin: o.xdsdBin, xdsdFlags: strings.Fields(o.xdsdFlags)}
	var err error
	if e.self, err = os.Executable(); err != nil {
		return nil, err
	}
	e.workDir = o.workDir
	if e.workDir == "" {
		if e.workDir, err = os.MkdirTemp("", "xdsbench-"); err != nil {
			return nil, err
		}
		if !o.keep {
			defer os.RemoveAll(e.workDir)
		}
	} else if err := os.MkdirAll(e.workDir, 0o755); err != nil {
		return nil, err
	}
	logf("work directory %s", e.workDir)
	if e.xdsdBin == "" && slices.Contains(o.servers, srvXDSDDir) {
		logf("building xdsd")
		if e.xdsdBin, err = buildXDSD(ctx, e.workDir); err != nil {
			return nil, err
		}
	}
	if o.pprofDir != "" {
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return nil, err
		}
	}
	if o.warmup && len(o.servers) > 0 && len(o.modes) > 0 {
		if err := warmUp(ctx, o, e, logf); err != nil {
			return nil, err
		}
	}
	var results []*result
	for _, mode := range o.modes {
		for pass := range o.passes {
			po := o
			if pass > 0 {
				po.pprofDir = "" // profiles come from the first pass
			}
			for _, name := range passOrder(o.servers, pass) {
				if ctx.Err() != nil {
					return results, fmt.Errorf("stopped before %s %s: %w", name, mode, context.Cause(ctx))
				}
				r := runServer(ctx, po, e, name, mode)
				r.Pass = pass
				results = append(results, r)
				if r.Err != "" {
					logf("%s %s: %s", name, mode, r.Err)
				}
			}
		}
	}
	return results, nil
}

// passOrder is the order of servers in pass number pass: the list rotated
// left by pass, so that over as many passes as servers each server is
// measured once in each position. The host's speed drifts over minutes,
// and a position can carry a bias of its own (the load tool's heap after
// the run before), so one fixed order would favour some servers.
func passOrder(servers []string, pass int) []string {
	if len(servers) == 0 {
		return nil
	}
	k := pass % len(servers)
	return append(slices.Clone(servers[k:]), servers[:k]...)
}

// warmUp runs the first server's initial sync in the first mode and
// discards it. The clients of the load tool grow its heap and goroutine
// stacks to their working size in their first sync; a server measured
// first would otherwise pay for that in its sync time and the load tool's
// CPU, which it shares.
func warmUp(ctx context.Context, o options, e env, logf func(string, ...any)) error {
	w := o
	w.rounds, w.pprofDir = 0, ""
	name, mode := o.servers[0], o.modes[0]
	logf("warm-up: an unmeasured initial sync against %s %s", name, mode)
	if r := runServer(ctx, w, e, name, mode); r.Err != "" {
		return fmt.Errorf("warm-up against %s %s: %s", name, mode, r.Err)
	}
	return nil
}

// result is what one server did in one mode.
type result struct {
	Server, Mode                    string
	Pass                            int // 0 to -passes - 1
	Clients, Clusters, Endpoints, K int
	StreamsPerConn                  int
	Client                          string
	Err                             string  `json:",omitempty"`
	InitialSync                     float64 // seconds until every client held everything
	InitialCPU                      float64 // server CPU seconds for the initial sync
	InitialClientCPU                float64 // this process's CPU seconds for the initial sync
	InitialBytes                    int64   // received by all clients in the initial sync
	IdleRSS                         int64   // server RSS with every client connected and idle
	ClientRSS                       int64   // this process's RSS, clients idle after the rounds
	Rounds                          []roundResult
	RSS, PeakRSS                    int64           // server VmRSS after the rounds, and VmHWM
	LoadAvg                         string          // /proc/loadavg when the server's run ended: other load on the machine
	ProfileRounds                   int             `json:",omitempty"`
	ProfilePath                     string          `json:",omitempty"`
	Failover                        *failoverResult `json:",omitempty"`
}

// failoverResult is the resumption of a killed replica's clients on the
// others (-failover).
type failoverResult struct {
	Clients  int     // the killed replica's
	Max      float64 // seconds from the kill until the last of them had its first response elsewhere
	Min, P50 float64 // the first of them, and the median
	Bytes    int64   // received by all clients meanwhile
}

// roundResult is one change: latencies are from the change (rename or
// control call) to the moment each client had received every changed
// endpoint set.
type roundResult struct {
	Gen           int
	Updated       int     // clients that got the change
	P50, P99, Max float64 // seconds, over clients
	Min           float64 // seconds: the first client
	Commit        float64 // seconds the change took to make (writing files, or the control call)
	Bytes         int64   // received by all clients until quiet
	CPU           float64 // server CPU seconds until quiet
	ClientCPU     float64 // this process's CPU seconds over the same span
	Quiet         bool    // false if quiet was not reached within -quiet-timeout
	latencies     []time.Duration
}

// runServer runs one mode against one server.
func runServer(ctx context.Context, o options, e env, name, mode string) (res *result) {
	res = &result{Server: name, Mode: mode, Clients: o.clients, Clusters: o.clusters, Endpoints: o.endpoints,
		K: o.changes, StreamsPerConn: o.streamsPerConn, Client: o.client}
	logf := e.log
	fail := func(err error) *result {
		res.Err = err.Error()
		return res
	}
	defer func() {
		b, _ := os.ReadFile("/proc/loadavg")
		res.LoadAvg = strings.TrimSpace(string(b))
		logf("%s %s: load average %s", name, mode, res.LoadAvg)
	}()
	rs, err := startServer(ctx, e, name, o.readyTimeout)
	if err != nil {
		return fail(err)
	}
	defer rs.stop(3 * time.Second)
	logf("%s %s: serving on %s (pids %v)", name, mode, strings.Join(rs.addrs(), ","), rs.pids())

	cpu0, err := rs.cpuTicks()
	if err != nil {
		return fail(err)
	}
	self0, err := cpuTicks(os.Getpid())
	if err != nil {
		return fail(err)
	}
	var syncProfile chan error // the CPU profile of the initial sync, if asked for
	if o.pprofDir != "" {
		syncProfile = make(chan error, 1)
		path := filepath.Join(o.pprofDir, name+"-"+mode+"-sync.pprof")
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", rs.pprofBase, o.pprofSeconds)
		go func() { syncProfile <- fetchTo(ctx, url, path) }() // waited for below
		defer func() {
			if syncProfile != nil {
				<-syncProfile
			}
		}()
	}
	stopSelfProfile := func() {}
	if o.pprofDir != "" {
		// The load tool's own profile of the initial sync, to its end (the
		// server's covers -pprof-seconds).
		if stopSelfProfile, err = startSelfProfile(filepath.Join(o.pprofDir, "xdsbench-"+name+"-"+mode+"-sync.pprof")); err != nil {
			return fail(err)
		}
		defer func() { stopSelfProfile() }()
	}
	start := time.Now()
	f, initial, err := startFleet(rs.addrs(), fleetConfig{
		clients: o.clients, clusters: o.clusters, delta: mode == "delta", client: o.client,
		streamsPerConn: o.streamsPerConn, readBuffer: o.readBuffer, writeBuffer: o.writeBuffer, window: o.window,
		node: o.node, repeatNode: o.repeatNode, failover: o.failover && mode == "delta" && len(rs.addrs()) > 1,
	})
	if err != nil {
		return fail(err)
	}
	defer f.stop() // before the server stops
	if err := f.wait(ctx, initial, o.syncTimeout); err != nil {
		return fail(fmt.Errorf("initial sync: %w", err))
	}
	stopSelfProfile()
	stopSelfProfile = func() {}
	res.InitialSync = slices.MaxFunc(initial.at, func(a, b time.Time) int { return a.Compare(b) }).Sub(start).Seconds()
	if !quiesce(ctx, f, rs, o.quiet, o.quietTimeout) {
		logf("%s %s: not quiet after the initial sync", name, mode)
	}
	cpu1, err := rs.cpuTicks()
	if err != nil {
		return fail(err)
	}
	self1, err := cpuTicks(os.Getpid())
	if err != nil {
		return fail(err)
	}
	res.InitialCPU = float64(cpu1-cpu0) / clockTicks()
	res.InitialClientCPU = float64(self1-self0) / clockTicks()
	res.InitialBytes = f.bytes.Load()
	runtime.GC()
	if res.IdleRSS, _, err = rs.memStatus(); err != nil {
		return fail(err)
	}
	if o.pprofDir != "" {
		err := <-syncProfile
		syncProfile = nil
		if err != nil {
			return fail(fmt.Errorf("initial sync profile: %w", err))
		}
		logf("%s %s: CPU profile of the initial sync (and %ds in all) in %s", name, mode, o.pprofSeconds,
			filepath.Join(o.pprofDir, name+"-"+mode+"-sync.pprof"))
		path := filepath.Join(o.pprofDir, name+"-"+mode+"-heap.pprof")
		if err := fetchTo(ctx, rs.pprofBase+"/debug/pprof/heap?gc=1", path); err != nil {
			return fail(fmt.Errorf("heap profile: %w", err))
		}
		logf("%s %s: heap profile with the clients idle in %s", name, mode, path)
		// The text forms: the heap's ends with the runtime's MemStats
		// (stacks, heap, GC), the goroutines' counts them by stack.
		for kind, q := range map[string]string{"memstats.txt": "heap?debug=1", "goroutine.txt": "goroutine?debug=1"} {
			if err := fetchTo(ctx, rs.pprofBase+"/debug/pprof/"+q, filepath.Join(o.pprofDir, name+"-"+mode+"-"+kind)); err != nil {
				return fail(fmt.Errorf("%s: %w", q, err))
			}
		}
		if err := writeHeapProfile(filepath.Join(o.pprofDir, "xdsbench-"+name+"-"+mode+"-heap.pprof")); err != nil {
			return fail(fmt.Errorf("heap profile of the load tool: %w", err))
		}
	}
	logf("%s %s: initial sync of %d clients in %.3fs, server CPU %.2fs, RSS %.1f MiB",
		name, mode, o.clients, res.InitialSync, res.InitialCPU, mib(res.IdleRSS))

	gen := 0
	for range o.rounds {
		gen++
		rr, err := measureRound(ctx, o, rs, f, gen)
		if err != nil {
			return fail(fmt.Errorf("round %d: %w", gen, err))
		}
		res.Rounds = append(res.Rounds, rr)
		logf("%s %s: round %d: change made in %.1fms, first client %.1fms, max %.1fms p50 %.1fms p99 %.1fms, %d bytes, CPU %.2fs%s",
			name, mode, gen, rr.Commit*1e3, rr.Min*1e3, rr.Max*1e3, rr.P50*1e3, rr.P99*1e3, rr.Bytes, rr.CPU, map[bool]string{false: " (not quiet)", true: ""}[rr.Quiet])
		runtime.GC()
	}
	if res.RSS, res.PeakRSS, err = rs.memStatus(); err != nil {
		return fail(err)
	}
	// This process's RSS is its clients' live memory, not the garbage of
	// the sync: read once it has returned that, after the rounds. Returned
	// before them, the first round would pay for faulting it back in, and
	// for its clients' buffers anew, and be slower than the rounds after.
	debug.FreeOSMemory()
	res.ClientRSS, _, _ = memStatus(os.Getpid())
	if o.pprofDir != "" {
		path := filepath.Join(o.pprofDir, name+"-"+mode+".pprof")
		n, err := profile(ctx, o, rs, f, &gen, path)
		if err != nil {
			return fail(fmt.Errorf("profile: %w", err))
		}
		res.ProfileRounds, res.ProfilePath = n, path
		logf("%s %s: %d changes profiled into %s", name, mode, n, path)
	}
	for _, p := range rs.all() {
		if exited, werr := p.exited(); exited {
			return fail(fmt.Errorf("server exited: %v (log: %s)", werr, p.log.Name()))
		}
	}
	if f.cfg.failover {
		fo, err := measureFailover(ctx, o, rs, f)
		if err != nil {
			return fail(fmt.Errorf("failover: %w", err))
		}
		res.Failover = fo
		logf("%s %s: failover: %d clients resumed within %.1fms, receiving %d bytes", name, mode, fo.Clients, fo.Max*1e3, fo.Bytes)
	}
	return res
}

// measureFailover kills the server's first replica and times until each of
// its clients has had a first response from another.
func measureFailover(ctx context.Context, o options, rs *running, f *fleet) (*failoverResult, error) {
	victims := 0
	for i := range o.clients {
		if f.home(i) == 0 {
			victims++
		}
	}
	r := newRound(o.clients, -1, nil, o.clusters)
	r.remaining.Store(int64(victims))
	f.resumed.Store(r)
	var profiled chan error // the second replica's CPU profile of the failover, if asked for
	if o.pprofDir != "" && len(rs.replicaPprof) > 1 {
		profiled = make(chan error, 1)
		path := filepath.Join(o.pprofDir, "failover-replica-2.pprof")
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", rs.replicaPprof[1], o.pprofSeconds)
		go func() { profiled <- fetchTo(ctx, url, path) }()
		defer func() { <-profiled }()
	}
	bytes0 := f.bytes.Load()
	t0 := time.Now()
	rs.replicas[0].kill()
	if err := f.wait(ctx, r, o.roundTimeout); err != nil {
		return nil, err
	}
	fo := &failoverResult{Clients: victims, Bytes: f.bytes.Load() - bytes0}
	var ds []time.Duration
	for _, at := range r.at {
		if !at.IsZero() {
			ds = append(ds, at.Sub(t0))
		}
	}
	slices.Sort(ds)
	if len(ds) > 0 {
		fo.Min, fo.P50, fo.Max = ds[0].Seconds(), quantile(ds, 0.5).Seconds(), ds[len(ds)-1].Seconds()
	}
	return fo, nil
}

// changedSets returns the endpoint sets that round gen changes: K
// consecutive indices, moving on by K each round.
func changedSets(o options, gen int) []int {
	idx := make([]int, o.changes)
	for j := range idx {
		idx[j] = ((gen-1)*o.changes + j) % o.clusters
	}
	return idx
}

// measureRound makes change gen and measures it.
func measureRound(ctx context.Context, o options, rs *running, f *fleet, gen int) (roundResult, error) {
	rr := roundResult{Gen: gen}
	idx := changedSets(o, gen)
	commit, err := rs.stage(ctx, gen, idx)
	if err != nil {
		return rr, err
	}
	r := newRound(o.clients, int32(gen), idx, o.clusters)
	f.startRound(r)
	bytes0 := f.bytes.Load()
	cpu0, err := rs.cpuTicks()
	if err != nil {
		return rr, err
	}
	self0, err := cpuTicks(os.Getpid())
	if err != nil {
		return rr, err
	}
	t0 := time.Now()
	if err := commit(); err != nil {
		return rr, err
	}
	rr.Commit = time.Since(t0).Seconds()
	werr := f.wait(ctx, r, o.roundTimeout)
	rr.Quiet = quiesce(ctx, f, rs, o.quiet, o.quietTimeout)
	cpu1, err := rs.cpuTicks()
	if err != nil {
		return rr, err
	}
	self1, err := cpuTicks(os.Getpid())
	if err != nil {
		return rr, err
	}
	rr.Bytes = f.bytes.Load() - bytes0
	rr.CPU = float64(cpu1-cpu0) / clockTicks()
	rr.ClientCPU = float64(self1-self0) / clockTicks()
	for _, at := range r.at {
		if !at.IsZero() {
			rr.latencies = append(rr.latencies, at.Sub(t0))
		}
	}
	rr.Updated = len(rr.latencies)
	if werr != nil {
		return rr, werr
	}
	slices.Sort(rr.latencies)
	rr.P50 = quantile(rr.latencies, 0.50).Seconds()
	rr.P99 = quantile(rr.latencies, 0.99).Seconds()
	rr.Max = rr.latencies[len(rr.latencies)-1].Seconds()
	rr.Min = rr.latencies[0].Seconds()
	return rr, nil
}

// quantile returns the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// quiesce waits until neither the bytes the clients receive nor the server's
// CPU time moved for window, and reports whether that happened within limit.
func quiesce(ctx context.Context, f *fleet, rs *running, window, limit time.Duration) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(max(window/6, time.Millisecond))
	defer tick.Stop()
	lastB := f.bytes.Load()
	lastC, _ := rs.cpuTicks()
	since := time.Now()
	for {
		select {
		case now := <-tick.C:
			b := f.bytes.Load()
			c, err := rs.cpuTicks()
			if err != nil {
				return false
			}
			if b != lastB || c != lastC {
				lastB, lastC, since = b, c, now
			} else if now.Sub(since) >= window {
				return true
			}
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// profile fetches a CPU profile of the server while changes run back to
// back, and returns how many ran. The load tool's own CPU profile over the
// same changes goes next to it, with "xdsbench-" before its name.
func profile(ctx context.Context, o options, rs *running, f *fleet, gen *int, path string) (int, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop, err := startSelfProfile(filepath.Join(filepath.Dir(path), "xdsbench-"+filepath.Base(path)))
	if err != nil {
		return 0, err
	}
	defer stop()
	done := make(chan error, 1)
	go func() { // owned by profile, which waits for it
		done <- fetchTo(pctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", rs.pprofBase, o.pprofSeconds), path)
	}()
	n := 0
	for {
		select {
		case err := <-done:
			return n, err
		default:
		}
		*gen++
		idx := changedSets(o, *gen)
		commit, err := rs.stage(ctx, *gen, idx)
		if err == nil {
			r := newRound(o.clients, int32(*gen), idx, o.clusters)
			f.startRound(r)
			if err = commit(); err == nil {
				err = f.wait(ctx, r, o.roundTimeout)
			}
		}
		if err != nil {
			cancel()
			<-done
			return n, err
		}
		n++
	}
}

// fetchTo writes the body of a GET of url to path.
func fetchTo(ctx context.Context, url, path string) error {
	resp, err := call(ctx, http.MethodGet, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// writeHeapProfile writes this process's heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startSelfProfile starts a CPU profile of this process into path; the
// function it returns stops it and closes the file.
func startSelfProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
