// Package daemon is `xdsd serve`: it loads the configuration directory,
// publishes it through the cache, serves xDS over gRPC and runs the admin
// HTTP endpoints, until its context ends.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"crypto/tls"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/examples"
	"github.com/xdsd/xdsd/fileout"
	"github.com/xdsd/xdsd/h2grpc"
	"github.com/xdsd/xdsd/heaptrim"
	"github.com/xdsd/xdsd/internal/authz"
	"github.com/xdsd/xdsd/internal/connlimit"
	"github.com/xdsd/xdsd/internal/metrics"
	"github.com/xdsd/xdsd/internal/tlsfiles"
	"github.com/xdsd/xdsd/internal/tokenfile"
	"github.com/xdsd/xdsd/server"
	"github.com/xdsd/xdsd/source/configdir"
	"github.com/xdsd/xdsd/source/etcdstore"
)

// Options configures the daemon. Addresses use host:port; an empty
// optional address turns that listener off.
type Options struct {
	// ConfigDir is the configuration directory; empty serves the embedded
	// example configuration.
	ConfigDir string
	// XDSAddr is the gRPC xDS address (required).
	XDSAddr string
	// AdminAddr is the admin HTTP address (optional).
	AdminAddr string
	// AdminOptional makes a failure to bind AdminAddr a warning rather than
	// an error (for the default address, which another instance may hold).
	AdminOptional bool
	// AdminTokenFile, if set, holds the bearer token that every admin
	// request but /healthz, /readyz and /metrics must bear
	// ("Authorization: Bearer <token>"); the file is read again when it
	// changes (package tokenfile). An AdminAddr that is not a loopback
	// address needs one, or AdminInsecure.
	AdminTokenFile string
	// AdminInsecure lets the admin endpoints serve on an address that is
	// not a loopback address without AdminTokenFile, with a warning.
	AdminInsecure bool
	// AdminShowSecrets makes /config_dump show secret material (private
	// keys, session ticket keys, generic secrets, ...), which it otherwise
	// replaces with "[redacted]". WriteDir's files always hold it.
	AdminShowSecrets bool
	// RESTAddr is the REST-JSON polling address (optional).
	RESTAddr string
	// RESTPollTimeout bounds how long a REST request at the current
	// version is held; zero means server.RESTConfig's default.
	RESTPollTimeout time.Duration
	// RESTTLSCert and RESTTLSKey, if set, serve REST over TLS; when not
	// set and TLSCert is, REST serves TLS with TLSCert and TLSKey. Over
	// TLS, ClientCA requires client certificates on REST too. The files
	// are reloaded when they change.
	RESTTLSCert, RESTTLSKey string
	// WriteDir, if set, receives one DiscoveryResponse file per type for
	// Envoy's filesystem subscriptions, rendered for the node WriteNode, in
	// WriteFormat (yaml, json, binary or text; empty means yaml).
	WriteDir    string
	WriteFormat string
	WriteNode   string
	// TLSCert and TLSKey, if set, serve xDS over TLS; ClientCA, if also
	// set, requires client certificates signed by it (mutual TLS). The
	// files are reloaded when they change.
	TLSCert, TLSKey, ClientCA string
	// AuthzFile, if set, holds the policy of which client certificate
	// identities may claim which nodes (package authz), on xDS and REST;
	// it needs ClientCA. The file is read again when it changes; a bad
	// edit keeps the last good policy.
	AuthzFile string
	// Logger receives the daemon's logs; nil means slog.Default().
	Logger *slog.Logger
	// Rescan, if set, makes the daemon walk the configuration directory
	// each time it receives (xdsd sends it SIGHUP), reading every file
	// whose size, times or inode changed: for changes the file watcher
	// does not report (configdir.Loader.Rescan).
	Rescan <-chan os.Signal
	// ShutdownGrace is how long streams may run after the context ends
	// before they are cut. Zero means five seconds.
	ShutdownGrace time.Duration
	// GRPCTransport picks the gRPC server transport: "xdsd" (or empty) for
	// xdsd's own (package h2grpc), "grpc-go" for grpc-go's.
	GRPCTransport string
	// KeepaliveTime is how long a client's connection may send nothing
	// before the server pings it; KeepaliveTimeout is how long it may then
	// still send nothing before the server closes it, ending its streams.
	// Zero means 30 s and 20 s; a negative KeepaliveTime turns the pings
	// off (dead clients are then found by TCP keepalive and failed writes
	// only, and a client that stops reading holds its streams for ever).
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxConnectionAge, if positive, is how long a client connection may
	// live, give or take 10 %: then the server sends GOAWAY, and
	// MaxConnectionAgeGrace later (zero: 10 s) ends its streams with
	// UNAVAILABLE, so that clients reconnect, and spread over the
	// replicas. Zero means for ever.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// MaxStreams, StreamsPerSecond and StreamBurst bound the streams
	// taken in, as server.Config's fields of those names do.
	MaxStreams       int
	StreamsPerSecond float64
	StreamBurst      int
	// MaxConnsPerIP, if positive, bounds the xDS connections open from
	// one source IP address: one past it is closed as it comes (package
	// connlimit), counted and logged at a bounded rate. Both transports.
	MaxConnsPerIP int
	// MaxStreamsPerConn bounds the streams open on one connection; zero
	// means 1,000. Both transports.
	MaxStreamsPerConn uint32
	// MaxRecvMsgSize bounds a request message; zero means 4 MiB. Both
	// transports.
	MaxRecvMsgSize int
	// MaxConnAssemblingBytes and MaxConnQueuedBytes are h2grpc.Options'
	// fields of those names (zero: their defaults); the xdsd transport
	// only.
	MaxConnAssemblingBytes, MaxConnQueuedBytes int64
	// Ready, if not nil, receives the bound addresses once listening.
	Ready func(Addrs)
	// Etcd, when its Endpoints are set, is where the configuration is
	// read, instead of ConfigDir (see package etcdstore).
	Etcd EtcdOptions
}

// EtcdOptions configures the configuration's store in etcd.
type EtcdOptions struct {
	etcdstore.ClientConfig
	// Prefix is the prefix of xdsd's keys; empty means
	// etcdstore.DefaultPrefix.
	Prefix string
	// ReplicaName names this replica in its status; empty means the
	// host name.
	ReplicaName string
}

// Addrs are the addresses the daemon listens on.
type Addrs struct {
	XDS   string
	Admin string
	REST  string
}

// Daemon is a running xdsd, made by Run.
type Daemon struct {
	// Read-only once Run has started serving.
	opts   Options
	log    *slog.Logger
	cache  *cache.Cache
	server *server.Server
	authz  *authz.File // nil without AuthzFile
	// grpc is the xDS gRPC server; connLimit bounds its listener's
	// connections per address (nil without MaxConnsPerIP). Both are set
	// before the admin endpoints serve, and not changed.
	grpc      grpcServer
	connLimit *connlimit.Listener
	writer    *fileout.Writer    // nil without WriteDir; used by writeFilesLoop only
	store     *etcdstore.Replica // nil without Etcd.Endpoints
	// etcdClient is the store's client (closed by Run); nil without it.
	etcdClient *clientv3.Client
	// served is the control plane identifier of the configuration
	// served; apply's only.
	served string
	// loaded is signalled (one waiting at most) after each load, applied
	// or rejected, for the replica's registration; nil without a store.
	loaded chan struct{}
	// filesDue tells writeFilesLoop that a configuration was published
	// (one waiting signal at most); nil without WriteDir.
	filesDue chan struct{}

	// The configuration's loads and publications, timed (see handleMetrics).
	loads, publishes metrics.Histogram

	mu        sync.Mutex // guards the fields below: written by the config goroutine, read by admin
	lastErr   error
	lastErrAt time.Time
	lastOKAt  time.Time // when the last configuration that loaded was published; zero: none yet (not ready)
	reloads   reloadCounts

	stopping atomic.Bool // the shutdown has begun: /readyz answers 503
}

// reloadCounts counts configuration loads by result.
type reloadCounts struct{ ok, failed uint64 }

// Run serves until ctx is done, then shuts down gracefully.
func Run(ctx context.Context, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 5 * time.Second
	}
	if o.KeepaliveTime == 0 {
		o.KeepaliveTime = 30 * time.Second
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = 20 * time.Second
	}
	if o.MaxConnectionAgeGrace <= 0 {
		o.MaxConnectionAgeGrace = 10 * time.Second
	}
	if fi, err := os.Stat(o.ConfigDir); o.ConfigDir != "" && err == nil && !fi.IsDir() {
		// Not there is waited for; a file is a mistake.
		return fmt.Errorf("config dir %s is a file, not a directory", o.ConfigDir)
	}
	d := &Daemon{opts: o, log: o.Logger, cache: cache.New(nil)}
	scfg := server.Config{Logger: o.Logger,
		MaxStreams: o.MaxStreams, StreamsPerSecond: o.StreamsPerSecond, StreamBurst: o.StreamBurst}
	if o.AuthzFile != "" {
		if o.ClientCA == "" {
			return errors.New("authz: a policy needs client certificates: give --client-ca (and --tls-cert, --tls-key)")
		}
		f, err := authz.Open(o.AuthzFile, o.Logger)
		if err != nil {
			return err
		}
		d.authz, scfg.Authorize = f, f.Authorize
		d.log.Info("authz: clients may claim only the nodes the policy allows their certificates", "file", o.AuthzFile, "rules", f.Policy().Rules())
	} else if o.ClientCA != "" {
		d.log.Warn("authz: no --authz-file: any client with a certificate from --client-ca may claim any node, and is served its configuration, secrets included")
	}
	d.server = server.New(d.cache, scfg)
	if len(o.Etcd.Endpoints) > 0 {
		if o.ConfigDir != "" {
			return errors.New("give a config dir or etcd endpoints, not both")
		}
		if d.opts.Etcd.ReplicaName == "" {
			d.opts.Etcd.ReplicaName, _ = os.Hostname()
		}
		cli, err := etcdstore.NewClient(o.Etcd.ClientConfig)
		if err != nil {
			return err
		}
		defer cli.Close()
		d.etcdClient, d.loaded = cli, make(chan struct{}, 1)
		d.store = etcdstore.NewReplica(etcdstore.Config{Client: cli, Prefix: o.Etcd.Prefix, Logger: o.Logger})
	}

	var tlsConfig *tls.Config
	if o.TLSCert != "" || o.TLSKey != "" {
		cfg, err := tlsfiles.NewServerConfig(tlsfiles.Config{CertFile: o.TLSCert, KeyFile: o.TLSKey, ClientCAFile: o.ClientCA, Logger: o.Logger})
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		tlsConfig = cfg
	} else if o.ClientCA != "" {
		return errors.New("tls: a client CA needs a server certificate and key")
	}
	gs, err := newGRPCServer(&o, tlsConfig)
	if err != nil {
		return err
	}
	restTLS, err := restTLSConfig(&o)
	if err != nil {
		return err
	}
	if o.WriteDir != "" {
		w, err := fileout.New(o.WriteDir, cmp.Or(o.WriteFormat, "yaml"))
		if err != nil {
			return fmt.Errorf("write dir: %w", err)
		}
		d.writer = w
	}
	var adminToken *tokenfile.File
	if o.AdminAddr != "" {
		warning, err := checkAdminAccess(o.AdminAddr, o.AdminTokenFile, o.AdminInsecure)
		if err != nil {
			return err
		}
		if warning != "" {
			d.log.Warn(warning)
		}
		if o.AdminTokenFile != "" {
			if adminToken, err = tokenfile.Open(o.AdminTokenFile, o.Logger); err != nil {
				return fmt.Errorf("admin: %w", err)
			}
		}
		if o.AdminShowSecrets {
			d.log.Warn("/config_dump shows secret material in clear (--admin-show-secrets): private keys, session ticket keys, generic secrets")
		}
	}
	xdsLis, err := net.Listen("tcp", o.XDSAddr)
	if err != nil {
		return fmt.Errorf("xds listener: %w", err)
	}
	d.grpc = gs
	if o.MaxConnsPerIP > 0 {
		d.connLimit = connlimit.New(xdsLis, o.MaxConnsPerIP, o.Logger)
		xdsLis = d.connLimit
	}
	var adminLis, restLis net.Listener
	if o.AdminAddr != "" {
		if adminLis, err = net.Listen("tcp", o.AdminAddr); err != nil {
			if !o.AdminOptional {
				xdsLis.Close()
				return fmt.Errorf("admin listener: %w", err)
			}
			d.log.Warn("admin endpoints off: cannot listen on the default admin address; set --admin-addr", "error", err)
			adminLis = nil
		}
	}
	if o.RESTAddr != "" {
		if restLis, err = net.Listen("tcp", o.RESTAddr); err != nil {
			xdsLis.Close()
			if adminLis != nil {
				adminLis.Close()
			}
			return fmt.Errorf("REST listener: %w", err)
		}
	}
	d.server.Register(gs)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := gs.Serve(xdsLis); err != nil {
			errc <- fmt.Errorf("xds server: %w", err)
		}
	}()
	var https []*http.Server
	serveHTTP := func(what string, lis net.Listener, h http.Handler) {
		// A request's body and reply have deadlines of their own (REST's
		// handler sets them): ReadTimeout and WriteTimeout would also
		// bound a long poll.
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		https = append(https, hs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s server: %w", what, err)
			}
		}()
	}
	if adminLis != nil {
		serveHTTP("admin", adminLis, requireToken(d.adminHandler(), adminToken))
	}
	if restLis != nil {
		if restTLS != nil {
			restLis = tls.NewListener(restLis, restTLS)
		}
		serveHTTP("REST", restLis, d.server.RESTHandler(server.RESTConfig{PollTimeout: o.RESTPollTimeout}))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		heaptrim.Run(ctx, d.log, d.server)
	}()
	if d.writer != nil {
		d.filesDue = make(chan struct{}, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.writeFilesLoop(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.watchConfig(ctx); err != nil {
			errc <- err
		}
	}()
	addrs := Addrs{XDS: xdsLis.Addr().String()}
	if adminLis != nil {
		addrs.Admin = adminLis.Addr().String()
	}
	if restLis != nil {
		addrs.REST = restLis.Addr().String()
	}
	if d.store != nil {
		started := time.Now()
		report := func() etcdstore.Registration {
			st := d.store.Status()
			r := etcdstore.Registration{Name: d.opts.Etcd.ReplicaName, Revision: st.Revision, Generation: st.Generation,
				Streams: d.server.Streams(), Started: started,
				Addresses: map[string]string{"xds": addrs.XDS, "admin": addrs.Admin, "rest": addrs.REST}}
			d.mu.Lock()
			if d.lastErr != nil { // the latest load was rejected
				r.Error = d.lastErr.Error()
			}
			d.mu.Unlock()
			return r
		}
		wg.Go(func() { etcdstore.Register(ctx, d.etcdClient, o.Etcd.Prefix, 0, d.loaded, d.log, report) })
		d.log.Info("xdsd serving", "xds", addrs.XDS, "admin", addrs.Admin, "rest", addrs.REST,
			"etcd", o.Etcd.Endpoints, "etcd_prefix", d.store.Status().Prefix, "replica", d.opts.Etcd.ReplicaName)
	} else {
		d.log.Info("xdsd serving", "xds", addrs.XDS, "admin", addrs.Admin, "rest", addrs.REST, "config_dir", o.ConfigDir)
	}
	if o.Ready != nil {
		o.Ready(addrs)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	cancel()
	d.shutdown(gs, https)
	wg.Wait()
	return runErr
}

// shutdown stops accepting, lets streams end for the grace period, then
// cuts them.
func (d *Daemon) shutdown(gs grpcServer, https []*http.Server) {
	d.log.Info("xdsd shutting down")
	d.stopping.Store(true)
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(d.opts.ShutdownGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		gs.Stop()
		<-done
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, hs := range https {
		if hs.Shutdown(sctx) != nil {
			hs.Close() // held long polls are cut
		}
	}
}

// watchConfig loads the configuration and reloads it on change; with no
// directory it serves the embedded example once.
func (d *Daemon) watchConfig(ctx context.Context) error {
	if d.store != nil {
		if err := d.store.Run(ctx, d.applyRevision, d.reject); !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	if d.opts.ConfigDir == "" {
		d.loadOnce(examples.Config(), "embedded example configuration")
		<-ctx.Done()
		return nil
	}
	l := configdir.NewLoader(d.opts.ConfigDir)
	if d.opts.Rescan != nil {
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel() // Watch has returned: stop forwarding
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case sig := <-d.opts.Rescan:
					d.log.Info("rescanning the configuration directory", "signal", sig)
					l.Rescan()
				}
			}
		})
	}
	return configdir.Watch(ctx, l, d.opts.ConfigDir, d.apply, d.reject)
}

func (d *Daemon) loadOnce(fsys fs.FS, name string) {
	res, err := configdir.NewFSLoader(fsys, name).Load()
	if err != nil {
		d.reject(err)
		return
	}
	d.apply(res)
}

// apply publishes a configuration that loaded: see applyRevision.
func (d *Daemon) apply(res *configdir.Result) { d.applyRevision(res, 0) }

// applyRevision publishes a configuration that loaded, read from etcd at
// revision rev (0: from a directory), in one step: the node grouping of
// its selectors and a snapshot for every group in use. If a group's
// snapshot does not build (the loader's checks should have caught why),
// the configuration is rejected, with nothing of it published.
func (d *Daemon) applyRevision(res *configdir.Result, rev int64) {
	start := time.Now()
	var groupOf cache.GroupFunc // nil without node selectors: the cache then never decodes the streams' nodes
	if len(res.Scoped) > 0 {
		groupOf = res.GroupOf
	}
	id := d.served
	if d.store != nil {
		// The responses of this publication say which replica and
		// revision they come from (Envoy shows it in its config dump).
		// Set just before it: a response of the configuration before
		// that is sent meanwhile carries the new revision already.
		id = fmt.Sprintf("xdsd %s revision %d", d.opts.Etcd.ReplicaName, rev)
		d.server.SetControlPlane(id)
	}
	changes, err := d.cache.Publish(cache.Publication{
		GroupOf: groupOf,
		Build: func(group string, last *cache.Snapshot) (*cache.Snapshot, error) {
			// Built from the group's last snapshot, the new one shares
			// everything the change left alone.
			return cache.NewSnapshotFrom(last, res.GroupResources(group)...)
		},
		BuildFailed: func(group string, err error) {
			d.log.Error("node group cannot be served; its nodes wait", "group", res.DescribeGroup(group), "error", err)
		},
	})
	if err != nil && d.store != nil {
		d.server.SetControlPlane(d.served) // what is served is what was
	}
	if be, ok := errors.AsType[*cache.BuildError](err); ok {
		d.reject(fmt.Errorf("the configuration cannot be served to %s: %w", res.DescribeGroup(be.Group), be.Err))
		return
	} else if err != nil {
		d.reject(fmt.Errorf("the configuration cannot be served: %w", err))
		return
	}
	d.served = id
	n := 0 // resources changed, over the groups
	for _, ch := range changes {
		for _, keys := range ch {
			n += len(keys)
		}
	}
	published := time.Now()
	d.loads.Observe(res.Waited + res.Took)
	d.publishes.Observe(published.Sub(start))
	d.mu.Lock()
	d.reloads.ok++
	d.lastErr, d.lastOKAt = nil, published
	d.mu.Unlock()
	d.log.Info("configuration loaded", "resources", res.Count(), "files", res.Files,
		"files_read", res.Reread, "files_parsed_ahead", res.Prepared, "changed", n, "waited", res.Waited, "load", res.Took, "publish", published.Sub(start))
	if d.filesDue != nil {
		select {
		case d.filesDue <- struct{}{}:
		default: // a write is due already: it writes this configuration
		}
	}
	d.signalLoaded()
}

// signalLoaded tells the replica's registration that a load ended.
func (d *Daemon) signalLoaded() {
	if d.loaded != nil {
		select {
		case d.loaded <- struct{}{}:
		default:
		}
	}
}

// writeRetryMin and writeRetryMax bound the wait before a failed write of
// WriteDir's files is tried again: it doubles from the first to the second.
const (
	writeRetryMin = 500 * time.Millisecond
	writeRetryMax = 30 * time.Second
)

// writeFilesLoop writes the files of WriteDir each time a configuration is
// published (filesDue), and after a failed write (the directory removed,
// say) tries again until a write succeeds, without waiting for the
// configuration to change, until ctx is done. A write due then is made
// once more.
func (d *Daemon) writeFilesLoop(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	wait := writeRetryMin
	for {
		select {
		case <-ctx.Done():
			select {
			case <-d.filesDue:
				d.writeFiles()
			default:
			}
			return
		case <-d.filesDue:
		case <-retry.C:
		}
		if d.writeFiles() {
			retry.Stop()
			wait = writeRetryMin
			continue
		}
		retry.Reset(wait)
		wait = min(2*wait, writeRetryMax)
	}
}

// writeFiles renders the configuration for WriteNode into WriteDir, and
// reports whether it succeeded.
func (d *Daemon) writeFiles() bool {
	node := &corev3.Node{Id: d.opts.WriteNode}
	written, err := d.writer.Write(d.cache.Snapshot(d.cache.GroupOf(node)))
	if err != nil {
		d.log.Error("writing files for filesystem subscriptions; trying again", "dir", d.writer.Dir(), "error", err)
		return false
	}
	if len(written) > 0 {
		d.log.Info("wrote files for filesystem subscriptions", "files", written)
	}
	return true
}

// ready reports whether a configuration has been published.
func (d *Daemon) ready() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.lastOKAt.IsZero()
}

// reject keeps the last good configuration and records why. A failure of
// the file watcher rejected nothing: it is logged, not counted.
func (d *Daemon) reject(err error) {
	if _, ok := errors.AsType[*configdir.WatcherError](err); ok {
		d.log.Error("file watcher failed; the configuration served is unchanged", "error", err)
		return
	}
	d.mu.Lock()
	d.reloads.failed++
	d.lastErr, d.lastErrAt = err, time.Now()
	loaded := !d.lastOKAt.IsZero()
	d.mu.Unlock()
	d.signalLoaded()
	if loaded {
		d.log.Error("configuration rejected; still serving the last good one", "error", err)
	} else {
		d.log.Error("configuration rejected; none loaded yet, serving nothing", "error", err)
	}
}

// restTLSConfig returns the TLS configuration of the REST listener: with
// RESTTLSCert and RESTTLSKey, else TLSCert and TLSKey, and ClientCA; nil
// for none.
func restTLSConfig(o *Options) (*tls.Config, error) {
	if o.RESTAddr == "" {
		return nil, nil
	}
	cert, key := o.RESTTLSCert, o.RESTTLSKey
	if cert == "" && key == "" {
		cert, key = o.TLSCert, o.TLSKey
	} else if cert == "" || key == "" {
		return nil, errors.New("REST tls: give both a certificate and a key")
	}
	if cert == "" {
		return nil, nil
	}
	cfg, err := tlsfiles.NewServerConfig(tlsfiles.Config{CertFile: cert, KeyFile: key, ClientCAFile: o.ClientCA,
		Logger: o.Logger, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return nil, fmt.Errorf("REST tls: %w", err)
	}
	return cfg, nil
}

// grpcServer is the gRPC server the daemon runs: *h2grpc.Server or
// *grpc.Server.
type grpcServer interface {
	grpc.ServiceRegistrar
	Serve(net.Listener) error
	Stop()
	GracefulStop()
}

// newGRPCServer returns the gRPC server for o.GRPCTransport, with o's
// keepalive, serving TLS with cfg if it is set.
func newGRPCServer(o *Options, cfg *tls.Config) (grpcServer, error) {
	switch o.GRPCTransport {
	case "", "xdsd":
		// Clients may ping every 10 s, as server.GRPCOptions lets them on
		// grpc-go's transport.
		return h2grpc.NewServer(h2grpc.Options{TLS: cfg, Codec: server.Codec{}, Logger: o.Logger,
			MinPingInterval:      10 * time.Second,
			MaxConcurrentStreams: o.MaxStreamsPerConn, MaxRecvMsgSize: o.MaxRecvMsgSize,
			MaxConnAssemblingBytes: o.MaxConnAssemblingBytes, MaxConnQueuedBytes: o.MaxConnQueuedBytes,
			KeepaliveTime: o.KeepaliveTime, KeepaliveTimeout: o.KeepaliveTimeout,
			MaxConnectionAge: o.MaxConnectionAge, MaxConnectionAgeGrace: o.MaxConnectionAgeGrace}), nil
	case "grpc-go":
		ka := keepalive.ServerParameters{Time: o.KeepaliveTime, Timeout: o.KeepaliveTimeout}
		if o.MaxConnectionAge > 0 { // grpc-go's jitter is 10 % too
			ka.MaxConnectionAge, ka.MaxConnectionAgeGrace = o.MaxConnectionAge, o.MaxConnectionAgeGrace
		}
		if ka.Time < 0 {
			ka.Time = time.Duration(math.MaxInt64) // grpc-go's "never"
		}
		opts := append(server.GRPCOptions(), grpc.KeepaliveParams(ka))
		if o.MaxStreamsPerConn > 0 {
			opts = append(opts, grpc.MaxConcurrentStreams(o.MaxStreamsPerConn))
		}
		if o.MaxRecvMsgSize > 0 {
			opts = append(opts, grpc.MaxRecvMsgSize(o.MaxRecvMsgSize))
		}
		if cfg != nil {
			opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
		}
		return grpc.NewServer(opts...), nil
	}
	return nil, fmt.Errorf("unknown gRPC transport %q: use xdsd or grpc-go", o.GRPCTransport)
}
