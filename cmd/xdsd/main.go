// Command xdsd is an xDS management server: `xdsd serve` serves the
// Envoy-native resources of a configuration directory to Envoy proxies and
// proxyless gRPC clients over every xDS variant.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/source/etcdstore"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usage = `xdsd: an xDS management server for Envoy and proxyless gRPC.

Usage:
  xdsd serve [flags]   serve the configuration directory over xDS
  xdsd version         print the version

Run 'xdsd serve --help' for the flags of serve.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "xdsd", versionString())
		return 0
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "xdsd: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configDir = fs.String("config-dir", "", "directory of Envoy-native resources (*.yaml, *.yml, *.json), watched for changes;\nempty serves the embedded example configuration")
		xdsAddr   = fs.String("xds-addr", ":18000", "gRPC xDS listen address")
		adminAddr = fs.String("admin-addr", "127.0.0.1:19000", "admin HTTP listen address (/healthz, /readyz, /status, /config_dump, /metrics, /debug/pprof);\nempty turns it off")
		admToken  = fs.String("admin-token-file", "", "file holding a bearer token that admin requests but /healthz, /readyz and /metrics must bear\n(Authorization: Bearer <token>); reread when it changes. Required when --admin-addr is not\na loopback address, unless --admin-insecure")
		admInsec  = fs.Bool("admin-insecure", false, "serve the admin endpoints on an --admin-addr that is not a loopback address without\n--admin-token-file, to anyone who can reach it")
		showSecr  = fs.Bool("admin-show-secrets", false, "show secret material (private keys, session ticket keys, generic secrets) in /config_dump,\nwhich otherwise replaces it with \"[redacted]\"; --write-dir files always hold it")
		restAddr  = fs.String("rest-addr", "", "REST-JSON polling listen address (POST /v3/discovery:<type>), over TLS with\n--rest-tls-cert or --tls-cert; empty turns it off")
		restPoll  = fs.Duration("rest-poll-timeout", 30*time.Second, "how long a REST request at the current version is held before 304 Not Modified; 0 means 30s")
		writeDir  = fs.String("write-dir", "", "also write one DiscoveryResponse file per type here, replaced atomically, for Envoy's\nfilesystem subscriptions (path_config_source); empty turns it off")
		writeFmt  = fs.String("write-format", "yaml", "encoding of --write-dir files: yaml, json, binary (.pb) or text (.pb_text)")
		writeNode = fs.String("write-node", "", "node id whose view of the configuration --write-dir renders")
		tlsCert   = fs.String("tls-cert", "", "PEM certificate chain for TLS on the xDS port; reloaded when it changes")
		tlsKey    = fs.String("tls-key", "", "PEM private key for --tls-cert")
		clientCA  = fs.String("client-ca", "", "PEM CA bundle: require client certificates signed by it (mutual TLS), on xDS and on REST over TLS")
		authzFile = fs.String("authz-file", "", "YAML policy of which client certificate identities may claim which node ids (see\ndocs/security.md); needs --client-ca; reread when it changes")
		restCert  = fs.String("rest-tls-cert", "", "PEM certificate chain for TLS on --rest-addr; when empty, --tls-cert's is used if given")
		restKey   = fs.String("rest-tls-key", "", "PEM private key for --rest-tls-cert")
		logLevel  = fs.String("log-level", "info", "log level: debug, info, warn or error")
		logFormat = fs.String("log-format", "text", "log format: text or json")
		grace     = fs.Duration("shutdown-grace", 5*time.Second, "on SIGTERM or SIGINT, how long open streams may run before they are closed; 0 means 5s\n(SIGHUP rescans the config directory)")
		kaTime    = fs.Duration("keepalive-time", 30*time.Second, "ping a client's connection once it has sent nothing for this long; 0 turns the pings off")
		kaTimeout = fs.Duration("keepalive-timeout", 20*time.Second, "close a connection that has still sent nothing, nor taken any of a response, this long\nafter such a ping; 0 means 20s")
		transport = fs.String("grpc-transport", "xdsd", "gRPC server transport: xdsd (its own HTTP/2 transport, made for large fleets of\nmostly idle streams) or grpc-go (grpc-go's)")
		etcdURLs  = fs.String("etcd-endpoints", "", "comma-separated etcd client URLs: read the configuration from etcd instead of\n--config-dir (see docs/etcd.md)")
		etcdPfx   = fs.String("etcd-prefix", etcdstore.DefaultPrefix, "prefix of xdsd's keys in etcd")
		etcdCA    = fs.String("etcd-ca", "", "PEM CA bundle for TLS to etcd")
		etcdCert  = fs.String("etcd-cert", "", "PEM client certificate for TLS to etcd")
		etcdKey   = fs.String("etcd-key", "", "PEM private key for --etcd-cert")
		replica   = fs.String("replica-name", "", "this replica's name, in its status; empty means the host name")
		maxAge    = fs.Duration("max-connection-age", 0, "close client connections after this long, give or take 10 %: GOAWAY, then, after\n--max-connection-age-grace, their streams end with UNAVAILABLE and the clients\nreconnect, spreading over the replicas (about 30m suggested); 0 turns it off")
		maxStrms  = fs.Int("max-streams", 0, "refuse a stream with UNAVAILABLE while this many are open (the client retries,\nperhaps on another replica); 0 means no bound")
		strmRate  = fs.Float64("stream-rate", 0, "take in at most this many new streams a second (see --stream-burst), refusing the\nrest with UNAVAILABLE: a replica restarted under thousands of clients syncs them at\nthis pace; 0 means no bound")
		strmBurst = fs.Int("stream-burst", 0, "how many new streams --stream-rate lets in at once; 0 means a second's worth")
		ageGrace  = fs.Duration("max-connection-age-grace", 10*time.Second, "how long the streams of a connection past --max-connection-age may still run; 0 means 10s")
		perIP     = fs.Int("max-conns-per-ip", 0, "close a client's new xDS connection, as it comes, while its IP address has this many\nopen (counted in /metrics, logged at a bounded rate); 0 means no bound")
		perConn   = fs.Uint("max-streams-per-conn", 1000, "streams one connection may hold open (SETTINGS_MAX_CONCURRENT_STREAMS); one past it\nis refused with REFUSED_STREAM; 0 means 1000")
		maxRecv   = fs.Int("max-recv-msg-size", 4<<20, "bytes a request message may have; a larger one fails its stream with\nRESOURCE_EXHAUSTED; 0 means 4 MiB")
		assemble  = fs.Int64("max-conn-assembling", 256<<20, "bytes of requests being received, not yet whole, that one connection may hold\n(--grpc-transport xdsd); a request past it fails its stream with RESOURCE_EXHAUSTED;\n0 means 256 MiB")
		queued    = fs.Int64("max-conn-queued", 16<<20, "bytes of requests that one connection may hold for its streams while they are busy\n(--grpc-transport xdsd): past it, the client is given no more flow-control window\nuntil they take some; 0 means 16 MiB")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: xdsd serve [flags]\n\nServes the resources of --config-dir over xDS (ADS and per-type services, SotW and\nincremental) and reloads them when files change. Every flag may also be set with an\nenvironment variable: XDSD_ and the flag name in capitals with _ for -\n(for example XDSD_CONFIG_DIR); a flag given on the command line wins.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := applyEnv(fs); err != nil {
		fmt.Fprintln(stderr, "xdsd:", err)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "xdsd serve: unexpected arguments %q\n", fs.Args())
		return 2
	}
	adminSet := false
	fs.Visit(func(f *flag.Flag) { adminSet = adminSet || f.Name == "admin-addr" })
	_, adminEnv := os.LookupEnv("XDSD_ADMIN_ADDR")
	logger, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "xdsd:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	err = daemon.Run(ctx, daemon.Options{
		Rescan:                 hup,
		ConfigDir:              *configDir,
		XDSAddr:                *xdsAddr,
		AdminAddr:              *adminAddr,
		AdminOptional:          !adminSet && !adminEnv,
		AdminTokenFile:         *admToken,
		AdminInsecure:          *admInsec,
		AdminShowSecrets:       *showSecr,
		RESTAddr:               *restAddr,
		RESTPollTimeout:        *restPoll,
		WriteDir:               *writeDir,
		WriteFormat:            *writeFmt,
		WriteNode:              *writeNode,
		TLSCert:                *tlsCert,
		TLSKey:                 *tlsKey,
		ClientCA:               *clientCA,
		Logger:                 logger,
		ShutdownGrace:          *grace,
		GRPCTransport:          *transport,
		KeepaliveTime:          cmp.Or(*kaTime, -1), // 0 is the daemon's default; here it is off
		KeepaliveTimeout:       *kaTimeout,
		MaxConnectionAge:       *maxAge,
		MaxConnectionAgeGrace:  *ageGrace,
		MaxStreams:             *maxStrms,
		StreamsPerSecond:       *strmRate,
		StreamBurst:            *strmBurst,
		MaxConnsPerIP:          *perIP,
		MaxStreamsPerConn:      uint32(min(*perConn, math.MaxUint32)),
		MaxRecvMsgSize:         *maxRecv,
		MaxConnAssemblingBytes: *assemble,
		MaxConnQueuedBytes:     *queued,
		AuthzFile:              *authzFile,
		RESTTLSCert:            *restCert,
		RESTTLSKey:             *restKey,
		Etcd: daemon.EtcdOptions{
			ClientConfig: etcdstore.ClientConfig{Endpoints: splitList(*etcdURLs), CA: *etcdCA, Cert: *etcdCert, Key: *etcdKey},
			Prefix:       *etcdPfx,
			ReplicaName:  *replica,
		},
	})
	if err != nil {
		logger.Error("xdsd stopped", "error", err)
		return 1
	}
	return 0
}

// applyEnv sets each flag from XDSD_<NAME> when that variable is set; the
// command line, parsed afterwards, overrides it.
func applyEnv(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "XDSD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, e)
			}
		}
	})
	return err
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
