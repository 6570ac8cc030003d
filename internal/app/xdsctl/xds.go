package xdsctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/client/grpctransport"
	"github.com/xdsd/xdsd/client/transport"
	// Every Envoy and xDS message, so that resources of any type, and the
	// typed_config inside them, decode and print.
	_ "github.com/xdsd/xdsd/internal/envoytypes"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/resource/redact"
)

// xdsFlags are the flags watch and get share.
type xdsFlags struct {
	server     string
	typ        string
	delta      bool
	ads        bool
	node       string
	cluster    string
	output     string
	useTLS     bool
	insecure   bool
	ca         string
	cert       string
	key        string
	serverName string
	// showSecrets prints secret material as the server sent it, rather
	// than as "[redacted]".
	showSecrets bool
}

const typesHelp = "cds, eds, lds, rds, srds, vhds, sds, rtds, ecds, or a full type URL"

func (f *xdsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.server, "server", "localhost:18000", "xDS server address (host:port, or a gRPC target such as dns:///xds.example.com:443)")
	fs.StringVar(&f.typ, "type", "", "resource type (required): "+typesHelp)
	fs.BoolVar(&f.delta, "delta", false, "use the incremental (delta) protocol instead of state of the world")
	fs.BoolVar(&f.ads, "ads", true, "use the aggregated service (ADS); --ads=false uses the type's own service (LDS, CDS, ...)")
	fs.StringVar(&f.node, "node", "xdsctl", "node id to present to the server (it may decide what is served)")
	fs.StringVar(&f.cluster, "cluster", "", "node cluster to present to the server")
	fs.StringVar(&f.output, "output", formatYAML, "output format: yaml (documents separated by ---) or json (one object per line)")
	fs.BoolVar(&f.useTLS, "tls", false, "connect with TLS (implied by --ca, --cert, --key and --server-name); without --ca the system roots verify the server")
	fs.BoolVar(&f.insecure, "insecure", true, "connect in plaintext (the default unless a TLS flag is given)")
	fs.StringVar(&f.ca, "ca", "", "PEM file of the CA certificates that verify the server")
	fs.StringVar(&f.cert, "cert", "", "PEM client certificate, for servers that require mutual TLS (with --key)")
	fs.StringVar(&f.key, "key", "", "PEM private key of --cert")
	fs.StringVar(&f.serverName, "server-name", "", "name to verify in the server's certificate (default: the host of --server)")
	fs.BoolVar(&f.showSecrets, "show-secrets", false, "print secret material (private keys, session ticket keys, generic secrets) as the server sent it;\nby default it is printed as \"[redacted]\"")
}

// typeURL returns the type URL of --type and its short name for output.
func (f *xdsFlags) typeURL() (url, short string, err error) {
	switch {
	case f.typ == "":
		return "", "", fmt.Errorf("--type is required: %s", typesHelp)
	case strings.Contains(f.typ, "/"):
		if t := resource.Lookup(f.typ); t != nil {
			return f.checkVariant(t)
		}
		if _, err := protoregistry.GlobalTypes.FindMessageByURL(f.typ); err != nil {
			return "", "", fmt.Errorf("--type %q: not a message type xdsctl knows: %w", f.typ, err)
		}
		if !f.ads {
			return "", "", fmt.Errorf("--type %q has no per-type service xdsctl knows; use --ads", f.typ)
		}
		return f.typ, f.typ, nil
	}
	t := resource.LookupShort(strings.ToLower(f.typ))
	if t == nil {
		return "", "", fmt.Errorf("--type %q: want %s", f.typ, typesHelp)
	}
	return f.checkVariant(t)
}

// checkVariant rejects the one variant that does not exist: VHDS is
// incremental only.
func (f *xdsFlags) checkVariant(t *resource.Type) (url, short string, err error) {
	if t.URL == resource.VirtualHostType && !f.delta {
		return "", "", errors.New("--type vhds is incremental only: add --delta")
	}
	return t.URL, t.Short, nil
}

// credentials returns the gRPC transport credentials the flags ask for.
func (f *xdsFlags) credentials(fs *flagSet) (credentials.TransportCredentials, error) {
	explicitInsecure := false
	fs.Visit(func(fl *flag.Flag) { explicitInsecure = explicitInsecure || (fl.Name == "insecure" && f.insecure) })
	wantTLS := f.useTLS || f.ca != "" || f.cert != "" || f.key != "" || f.serverName != ""
	if !wantTLS {
		return insecure.NewCredentials(), nil
	}
	if explicitInsecure {
		return nil, errors.New("--insecure contradicts --tls, --ca, --cert, --key and --server-name")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no PEM certificate in it", f.ca)
		}
		cfg.RootCAs = pool
	}
	if (f.cert == "") != (f.key == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if f.cert != "" {
		kp, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return credentials.NewTLS(cfg), nil
}

// xdsConn is a client connection set up from the flags.
type xdsConn struct {
	client  *client.Client
	server  string
	typeURL string
	short   string
	printer *printer
	tap     *tap
	// showSecrets prints secret material rather than "[redacted]".
	showSecrets bool
}

// open validates the flags and builds the client. The caller closes
// s.client.
func (f *xdsFlags) open(fs *flagSet, stdout io.Writer, expiry time.Duration) (*xdsConn, error) {
	if err := checkFormat(f.output); err != nil {
		return nil, err
	}
	url, short, err := f.typeURL()
	if err != nil {
		return nil, err
	}
	if f.server == "" {
		return nil, errors.New("--server is empty")
	}
	creds, err := f.credentials(fs)
	if err != nil {
		return nil, err
	}
	tp := &tap{typeURL: url, delta: f.delta, changed: make(chan struct{}, 1)}
	c, err := client.New(client.Config{
		Node:        &corev3.Node{Id: f.node, Cluster: f.cluster, UserAgentName: "xdsctl", UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: versionString()}},
		Server:      f.server,
		Transport:   tapBuilder{inner: grpctransport.Builder{DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(creds)}}, tap: tp},
		ADS:         f.ads,
		Delta:       f.delta,
		WatchExpiry: expiry,
		// For listeners, clusters and scoped routes an empty list means
		// the wildcard to every server (go-control-plane's snapshot cache
		// takes an explicit "*" for a name); for the other types the
		// client sends "*".
		LegacyWildcard: true,
	})
	if err != nil {
		return nil, err
	}
	return &xdsConn{client: c, server: f.server, typeURL: url, short: short, printer: &printer{w: stdout, format: f.output}, tap: tp,
		showSecrets: f.showSecrets}, nil
}

// updateEvent is the event printed for an update: its resource with
// secret material redacted, unless --show-secrets.
func (s *xdsConn) updateEvent(u client.Update) event {
	m := u.Message
	if !s.showSecrets {
		m = redact.Message(m)
	}
	e := event{Event: eventUpdate, Type: s.short, TypeURL: u.TypeURL, Name: u.Name, Version: u.Version, Resource: m}
	if u.TTL > 0 {
		e.TTL = u.TTL.String()
	}
	return e
}

func (s *xdsConn) doesNotExistEvent(name string) event {
	return event{Event: eventDoesNotExist, Type: s.short, TypeURL: s.typeURL, Name: name}
}

// funcWatcher adapts three functions to client.Watcher.
type funcWatcher struct {
	update       func(client.Update)
	err          func(error)
	doesNotExist func(string)
}

func (w funcWatcher) OnUpdate(u client.Update)   { w.update(u) }
func (w funcWatcher) OnError(err error)          { w.err(err) }
func (w funcWatcher) OnDoesNotExist(name string) { w.doesNotExist(name) }
func (s *xdsConn) watch(names []string, w client.Watcher) (cancel func()) {
	if len(names) == 0 {
		names = []string{"*"}
	}
	cancels := make([]func(), 0, len(names))
	for _, n := range names {
		cancels = append(cancels, s.client.Watch(s.typeURL, n, w))
	}
	return func() {
		for _, c := range cancels {
			c()
		}
	}
}

const watchHelp = `Usage: xdsctl watch --type TYPE [flags] [NAME...]

Subscribes to resources of one type on an xDS server and prints every update
as it arrives, ACKing each, until interrupted (Ctrl-C) or --count events.
With no NAME it watches every resource of the type (a wildcard). Each event
has the event kind (update or does_not_exist), the type, the name, the
version the server gave and, for updates, the resource itself. Errors (a
lost connection, a rejected response) go to stderr; the watch goes on and
reconnects.

Works against any xDS server: xdsd, go-control-plane, Istio's istiod, ...
Secret material (private keys, session ticket keys, generic secrets) is
printed as "[redacted]" unless --show-secrets is given.

Examples:
  xdsctl watch --type cds                                  # every cluster on localhost:18000
  xdsctl watch --server xds.internal:18000 --type eds hello world
  xdsctl watch --type lds --delta --output json | jq .name
  xdsctl watch --type rds --ads=false --node envoy-1 --cluster edge hello
  xdsctl watch --type cds --ca ca.pem --server-name xds.internal --server xds.internal:443
  xdsctl watch --type cds --count 1                        # wait for the first update, then exit
`

// Watch is `xdsctl watch`: it prints updates of the resources named in
// args (or of every resource of the type) until ctx ends or --count
// events were printed.
func Watch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("watch", watchHelp, stderr)
	var f xdsFlags
	f.register(fs.FlagSet)
	count := fs.Int("count", 0, "exit after this many events (updates and does-not-exist); 0 runs until interrupted")
	expiry := fs.Duration("expiry", client.DefaultWatchExpiry, "report a named resource as not existing when it has not arrived within this time")
	names, done, code := parse(fs, args, stdout)
	if done {
		return code
	}
	if *count < 0 {
		fmt.Fprintln(stderr, "xdsctl watch: --count must be 0 or more")
		return exitUsage
	}
	s, err := f.open(fs, stdout, *expiry)
	if err != nil {
		fmt.Fprintln(stderr, "xdsctl watch:", err)
		return exitUsage
	}
	defer s.client.Close()

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu      sync.Mutex
		printed int
		failed  error
	)
	emit := func(e event) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if err := s.printer.print(e); err != nil {
			failed = err
			stop()
			return
		}
		printed++
		if *count > 0 && printed >= *count {
			stop()
		}
	}
	cancel := s.watch(names, funcWatcher{
		update:       func(u client.Update) { emit(s.updateEvent(u)) },
		doesNotExist: func(name string) { emit(s.doesNotExistEvent(name)) },
		err:          func(err error) { fmt.Fprintln(stderr, "xdsctl watch: error:", err) },
	})
	defer cancel()
	<-ctx.Done()
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		fmt.Fprintln(stderr, "xdsctl watch:", failed)
		return exitFail
	}
	return exitOK
}

const getHelp = `Usage: xdsctl get --type TYPE [flags] [NAME...]

Fetches resources of one type from an xDS server once, prints them and exits.
With no NAME it prints every resource of the type that the server sends for
a wildcard subscription. The output is the same as xdsctl watch's, secret
material "[redacted]" unless --show-secrets is given.

Exit status: 0 if every NAME exists; 1 if any does not (they are listed on
stderr), if the server cannot be reached or rejects the request, or if no
answer came within --timeout; 2 for a bad command line.

How a missing name is recognised: listeners and clusters over state of the
world are fetched by wildcard, so the server's answer is complete; over
--delta, servers such as xdsd say at once that a name does not exist; for
other types the server stays silent, and a name not received within
--timeout counts as missing.

Examples:
  xdsctl get --type cds                                  # every cluster on localhost:18000
  xdsctl get --type cds hello || echo "cluster hello is missing"
  xdsctl get --server xds.internal:18000 --type eds hello --output json
  xdsctl get --type rds --delta --timeout 5s hello
  xdsctl get --type lds --tls --ca ca.pem --cert client.pem --key client-key.pem
`

// Get is `xdsctl get`: it fetches the resources named in args (or every
// resource of the type), prints them, and says whether all exist.
func Get(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("get", getHelp, stderr)
	var f xdsFlags
	f.register(fs.FlagSet)
	timeout := fs.Duration("timeout", 15*time.Second, "give up (exit 1) when the answer has not come within this time")
	names, done, code := parse(fs, args, stdout)
	if done {
		return code
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "xdsctl get: --timeout must be positive")
		return exitUsage
	}
	s, err := f.open(fs, io.Discard, *timeout)
	if err != nil {
		fmt.Fprintln(stderr, "xdsctl get:", err)
		return exitUsage
	}
	defer s.client.Close()
	res, err := fetch(ctx, s, names, *timeout)
	if err != nil {
		fmt.Fprintln(stderr, "xdsctl get:", err)
		return exitFail
	}
	s.printer.w = stdout
	for _, u := range res.found {
		if err := s.printer.print(s.updateEvent(u)); err != nil {
			fmt.Fprintln(stderr, "xdsctl get:", err)
			return exitFail
		}
	}
	if len(res.missing) > 0 {
		fmt.Fprintf(stderr, "xdsctl get: %d of %d %s resources not found: %s\n", len(res.missing), len(names), s.short, strings.Join(res.missing, ", "))
		return exitFail
	}
	return exitOK
}

// fetched is the answer of a get.
type fetched struct {
	found   []client.Update // sorted by name
	missing []string        // sorted
}

// fetch waits until the answer for names (every resource when empty) is
// known, or fails on a stream error, a rejected response, ctx's end or
// timeout.
func fetch(ctx context.Context, s *xdsConn, names []string, timeout time.Duration) (*fetched, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wanted := map[string]bool{}
	for _, n := range names {
		wanted[n] = true
	}
	// Listeners and clusters in SotW: every response carries all of them,
	// so a wildcard's first response tells which named ones exist.
	byWildcard := len(names) == 0
	if t := resource.Lookup(s.typeURL); t != nil && t.FullState && !s.tap.delta {
		byWildcard = true
	}
	var (
		mu       sync.Mutex
		updates  = map[string]client.Update{}
		notExist = map[string]bool{}
		errs     []error
		changed  = s.tap.changed
	)
	kick := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	w := funcWatcher{
		update: func(u client.Update) {
			mu.Lock()
			updates[u.Name] = u
			delete(notExist, u.Name)
			mu.Unlock()
			kick()
		},
		doesNotExist: func(name string) {
			mu.Lock()
			notExist[name] = true
			delete(updates, name)
			mu.Unlock()
			kick()
		},
		err: func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			kick()
		},
	}
	watchNames := names
	if byWildcard {
		watchNames = nil
	}
	stopWatch := s.watch(watchNames, w)
	defer stopWatch()

	// complete reports whether the answer is known; it holds mu.
	complete := func() bool {
		if byWildcard {
			n, ok := s.tap.firstResponse()
			return ok && len(updates) >= n
		}
		for n := range wanted {
			if _, ok := updates[n]; !ok && !notExist[n] {
				return false
			}
		}
		return true
	}
wait:
	for {
		mu.Lock()
		if len(errs) > 0 {
			err := errors.Join(errs...)
			mu.Unlock()
			return nil, err
		}
		if complete() {
			break
		}
		mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			mu.Lock()
			if complete() || len(errs) > 0 {
				// Answered as the deadline came (the watch's expiry, which
				// get sets to the same time, says what does not exist).
				mu.Unlock()
				continue
			}
			if !byWildcard && s.tap.connected() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// The server took the subscription and sent nothing for
				// the names still pending: they count as missing (the
				// watch's expiry, which started later, has not fired yet).
				break wait
			}
			var pending []string
			for n := range wanted {
				if _, ok := updates[n]; !ok && !notExist[n] {
					pending = append(pending, n)
				}
			}
			mu.Unlock()
			sort.Strings(pending)
			if len(pending) > 0 {
				return nil, fmt.Errorf("no answer from %s within %s for %s: %s", s.server, timeout, s.short, strings.Join(pending, ", "))
			}
			return nil, fmt.Errorf("%s sent no %s resources within %s (none exist, or it does not answer this subscription)", s.server, s.short, timeout)
		}
	}
	defer mu.Unlock()
	res := &fetched{}
	for name, u := range updates {
		if len(wanted) == 0 || wanted[name] {
			res.found = append(res.found, u)
		}
	}
	sort.Slice(res.found, func(i, j int) bool { return res.found[i].Name < res.found[j].Name })
	for n := range wanted {
		if _, ok := updates[n]; !ok {
			res.missing = append(res.missing, n)
		}
	}
	sort.Strings(res.missing)
	return res, nil
}

// tap is a transport that notes the first response of one type, so get
// knows how many resources a wildcard answer holds. It only reads; the
// client does all the protocol work.
type tap struct {
	typeURL string
	delta   bool
	changed chan struct{} // capacity 1: poked on the first response

	mu     sync.Mutex // guards seen, count and opened
	seen   bool
	count  int  // resources with a body in the first response
	opened bool // a stream to the server was opened
}

// connected says whether a stream to the server was opened.
func (t *tap) connected() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.opened
}

func (t *tap) firstResponse() (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count, t.seen
}

// observe looks at one encoded response.
func (t *tap) observe(msg []byte) {
	var typeURL string
	n := 0
	if t.delta {
		var r discovery.DeltaDiscoveryResponse
		if proto.Unmarshal(msg, &r) != nil {
			return
		}
		typeURL = r.GetTypeUrl()
		for _, res := range r.GetResources() {
			if res.GetResource() != nil {
				n++
			}
		}
	} else {
		var r discovery.DiscoveryResponse
		if proto.Unmarshal(msg, &r) != nil {
			return
		}
		typeURL = r.GetTypeUrl()
		for _, a := range r.GetResources() {
			if a.GetTypeUrl() == "type.googleapis.com/envoy.service.discovery.v3.Resource" {
				var w discovery.Resource
				if a.UnmarshalTo(&w) != nil || w.GetResource() == nil {
					continue // a heartbeat, or the client NACKs it
				}
			}
			n++
		}
	}
	if typeURL != t.typeURL {
		return
	}
	t.mu.Lock()
	first := !t.seen
	if first {
		t.seen, t.count = true, n
	}
	t.mu.Unlock()
	if first {
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
}

// tapBuilder builds the inner transport with every stream tapped.
type tapBuilder struct {
	inner transport.Builder
	tap   *tap
}

func (b tapBuilder) Build(server string) (transport.Transport, error) {
	tr, err := b.inner.Build(server)
	if err != nil {
		return nil, err
	}
	return tapTransport{Transport: tr, tap: b.tap}, nil
}

type tapTransport struct {
	transport.Transport
	tap *tap
}

func (t tapTransport) NewStream(ctx context.Context, method string) (transport.Stream, error) {
	st, err := t.Transport.NewStream(ctx, method)
	if err != nil {
		return nil, err
	}
	t.tap.mu.Lock()
	t.tap.opened = true
	t.tap.mu.Unlock()
	return tapStream{Stream: st, tap: t.tap}, nil
}

type tapStream struct {
	transport.Stream
	tap *tap
}

func (s tapStream) Recv() ([]byte, error) {
	msg, err := s.Stream.Recv()
	if err == nil {
		s.tap.observe(msg)
	}
	return msg, err
}
