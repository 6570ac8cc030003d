package tlsfiles

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// ca is a test certificate authority.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// issued is a certificate with its key, as PEM and as a tls.Certificate.
type issued struct {
	certPEM, keyPEM []byte
	serial          *big.Int
}

func (i issued) tlsCert(t *testing.T) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(i.certPEM, i.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newSerial(t *testing.T) *big.Int {
	t.Helper()
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (c *ca) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

func (c *ca) issue(t *testing.T, name string, server bool) issued {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return issued{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		serial:  tmpl.SerialNumber,
	}
}

// writeFile writes data to path in place (truncate and write), like a
// non-atomic writer would.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// replaceFile writes data next to path and renames it over path.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// files are the paths handed to the package under test.
type files struct{ cert, key, ca string }

// writeFiles writes a server certificate and key, and the client CA bundle
// if clientCA is not nil, to a new temporary directory.
func writeFiles(t *testing.T, server issued, clientCA []byte) files {
	t.Helper()
	dir := t.TempDir()
	f := files{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key")}
	writeFile(t, f.cert, server.certPEM)
	writeFile(t, f.key, server.keyPEM)
	if clientCA != nil {
		f.ca = filepath.Join(dir, "ca.crt")
		writeFile(t, f.ca, clientCA)
	}
	return f
}

// replaceServerCert atomically replaces the certificate and key files.
func (f files) replaceServerCert(t *testing.T, c issued) {
	t.Helper()
	replaceFile(t, f.key, c.keyPEM)
	replaceFile(t, f.cert, c.certPEM)
}

// startServer serves the gRPC health service with cfg on 127.0.0.1 and
// returns its address; the server stops when the test ends.
func startServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// check connects to addr with a new gRPC client trusting roots and
// presenting clientCert (if not nil), runs a health check, and returns the
// certificate the server presented.
func check(addr string, roots *x509.CertPool, clientCert *tls.Certificate) (*x509.Certificate, error) {
	return checkMax(addr, roots, clientCert, 0)
}

// checkMax is check with a maximum TLS version (0 for the default).
func checkMax(addr string, roots *x509.CertPool, clientCert *tls.Certificate, maxVersion uint16) (*x509.Certificate, error) {
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion}
	if clientCert != nil {
		tc.Certificates = []tls.Certificate{*clientCert}
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
	if err != nil {
		return nil, err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return nil, fmt.Errorf("health status %v", resp.GetStatus())
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return nil, fmt.Errorf("no TLS peer certificate in %T", p.AuthInfo)
	}
	return info.State.PeerCertificates[0], nil
}

// mustServe checks that a health check succeeds and that the server
// presented the certificate with serial want.
func mustServe(t *testing.T, addr string, roots *x509.CertPool, clientCert *tls.Certificate, want *big.Int) {
	t.Helper()
	leaf, err := check(addr, roots, clientCert)
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	if leaf.SerialNumber.Cmp(want) != 0 {
		t.Fatalf("server presented serial %v, want %v", leaf.SerialNumber, want)
	}
}

// mustFail checks that the connection is refused by the TLS layer.
func mustFail(t *testing.T, addr string, roots *x509.CertPool, clientCert *tls.Certificate) {
	t.Helper()
	_, err := check(addr, roots, clientCert)
	if err == nil {
		t.Fatal("health check succeeded, want a TLS failure")
	}
	t.Logf("refused as expected: %v", err)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("health check: %v, want code Unavailable", err)
	}
}

// eventually calls f until it returns nil, failing the test with f's last
// error after a deadline.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing at the deadline: %v", what, err)
		}
		<-tick.C
	}
}

// logRecorder is a slog.Handler that keeps the messages it receives.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (*logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler     { return l }
func (l *logRecorder) WithGroup(string) slog.Handler          { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	l.msgs = append(l.msgs, msg)
	return nil
}

// count returns how many messages contain s.
func (l *logRecorder) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

const reloadFailed = "reloading TLS files failed"

func TestTLS(t *testing.T) {
	caA, caB := newCA(t, "ca-a"), newCA(t, "ca-b")

	t.Run("Config", func(t *testing.T) {
		f := writeFiles(t, caA.issue(t, "server", true), caA.pem)
		cfg, err := ServerConfig(f.cert, f.key, "")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.NoClientCert ||
			len(cfg.NextProtos) != 1 || cfg.NextProtos[0] != "h2" || cfg.GetConfigForClient == nil {
			t.Fatalf("unexpected plain TLS config: %+v", cfg)
		}
		cfg, err = ServerConfig(f.cert, f.key, f.ca)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ClientAuth != tls.RequireAndVerifyClientCert {
			t.Fatalf("ClientAuth = %v, want RequireAndVerifyClientCert", cfg.ClientAuth)
		}
	})

	t.Run("StartupErrors", func(t *testing.T) {
		good := caA.issue(t, "server", true)
		other := caA.issue(t, "other", true)
		dir := t.TempDir()
		path := func(name string, data []byte) string {
			p := filepath.Join(dir, name)
			writeFile(t, p, data)
			return p
		}
		cert, key := path("cert.pem", good.certPEM), path("key.pem", good.keyPEM)
		caFile := path("ca.pem", caA.pem)
		missing := filepath.Join(dir, "missing.pem")
		garbage := path("garbage.pem", []byte("not a certificate\n"))
		truncCert := path("trunc-cert.pem", good.certPEM[:len(good.certPEM)/2])
		truncCA := path("trunc-ca.pem", append(append([]byte{}, caA.pem...), caB.pem[:len(caB.pem)/2]...))
		otherKey := path("other-key.pem", other.keyPEM)
		keyAsCA := path("key-as-ca.pem", good.keyPEM)
		empty := path("empty.pem", nil)

		for _, tc := range []struct{ name, cert, key, ca string }{
			{"no cert file name", "", key, ""},
			{"no key file name", cert, "", ""},
			{"missing cert", missing, key, ""},
			{"missing key", cert, missing, ""},
			{"garbage cert", garbage, key, ""},
			{"truncated cert", truncCert, key, ""},
			{"garbage key", cert, garbage, ""},
			{"mismatched key", cert, otherKey, ""},
			{"missing client CA", cert, key, missing},
			{"garbage client CA", cert, key, garbage},
			{"empty client CA", cert, key, empty},
			{"client CA without certificate", cert, key, keyAsCA},
			{"truncated client CA bundle", cert, key, truncCA},
		} {
			if _, err := ServerConfig(tc.cert, tc.key, tc.ca); err == nil {
				t.Errorf("%s: ServerConfig succeeded, want an error", tc.name)
			}
		}
		if _, err := ServerConfig(cert, key, caFile); err != nil {
			t.Errorf("good files: %v", err)
		}
	})

	t.Run("ServerAuth", func(t *testing.T) {
		srv := caA.issue(t, "server", true)
		f := writeFiles(t, srv, nil)
		cfg, err := ServerConfig(f.cert, f.key, "")
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		mustServe(t, addr, caA.pool(), nil, srv.serial)
		mustFail(t, addr, caB.pool(), nil)
		mustFail(t, addr, x509.NewCertPool(), nil)
	})

	t.Run("MutualTLS", func(t *testing.T) {
		srv := caA.issue(t, "server", true)
		f := writeFiles(t, srv, caA.pem)
		cfg, err := ServerConfig(f.cert, f.key, f.ca)
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		good := caA.issue(t, "client-a", false).tlsCert(t)
		bad := caB.issue(t, "client-b", false).tlsCert(t)
		mustServe(t, addr, caA.pool(), &good, srv.serial)
		mustFail(t, addr, caA.pool(), nil)
		mustFail(t, addr, caA.pool(), &bad)
		mustFail(t, addr, caB.pool(), &good) // and the server is still checked

		// With TLS 1.3 a refused client certificate surfaces on the
		// client only as a broken connection; TLS 1.2 shows the server's
		// handshake alert.
		for _, c := range []*tls.Certificate{nil, &bad} {
			_, err := checkMax(addr, caA.pool(), c, tls.VersionTLS12)
			if err == nil || !strings.Contains(err.Error(), "remote error: tls:") {
				t.Errorf("TLS 1.2 with client cert %v: %v, want a TLS alert from the server", c != nil, err)
			} else {
				t.Logf("refused as expected: %v", err)
			}
		}
		mustServeMax := func(c *tls.Certificate) {
			t.Helper()
			if _, err := checkMax(addr, caA.pool(), c, tls.VersionTLS12); err != nil {
				t.Fatalf("TLS 1.2: %v", err)
			}
		}
		mustServeMax(&good)
	})

	t.Run("ReloadServerCert", func(t *testing.T) {
		// The default check interval: the new certificate shows up
		// within about a second.
		srvA, srvB := caA.issue(t, "server-a", true), caB.issue(t, "server-b", true)
		f := writeFiles(t, srvA, nil)
		cfg, err := ServerConfig(f.cert, f.key, "")
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		mustServe(t, addr, caA.pool(), nil, srvA.serial)
		mustFail(t, addr, caB.pool(), nil)

		f.replaceServerCert(t, srvB)
		eventually(t, "client trusting only the new CA", func() error {
			_, err := check(addr, caB.pool(), nil)
			return err
		})
		mustServe(t, addr, caB.pool(), nil, srvB.serial)
		mustFail(t, addr, caA.pool(), nil)
	})

	t.Run("BadFilesKeepServing", func(t *testing.T) {
		srvA, srvB := caA.issue(t, "server-a", true), caB.issue(t, "server-b", true)
		f := writeFiles(t, srvA, nil)
		logs := &logRecorder{}
		cfg, err := NewServerConfig(Config{CertFile: f.cert, KeyFile: f.key, Logger: slog.New(logs), CheckInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		mustServe(t, addr, caA.pool(), nil, srvA.serial)

		// Each bad version of the files is reported once and the old
		// certificate keeps serving.
		for i, bad := range []struct {
			name string
			edit func()
		}{
			{"half-written cert", func() { writeFile(t, f.cert, srvB.certPEM[:len(srvB.certPEM)/2]) }},
			{"garbage cert", func() { writeFile(t, f.cert, []byte("garbage\n")) }},
			{"empty cert", func() { writeFile(t, f.cert, nil) }},
			{"new cert with old key", func() { replaceFile(t, f.cert, srvB.certPEM) }},
		} {
			bad.edit()
			want := i + 1
			eventually(t, bad.name+": reload failure logged", func() error {
				mustServe(t, addr, caA.pool(), nil, srvA.serial)
				if n := logs.count(reloadFailed); n != want {
					return fmt.Errorf("%d reload failures logged, want %d", n, want)
				}
				return nil
			})
			mustServe(t, addr, caA.pool(), nil, srvA.serial)
			mustFail(t, addr, caB.pool(), nil)
			if n := logs.count(reloadFailed); n != want {
				t.Fatalf("%s: %d reload failures logged, want %d", bad.name, n, want)
			}
		}

		// The matching key completes the pair.
		replaceFile(t, f.key, srvB.keyPEM)
		eventually(t, "new certificate served", func() error {
			_, err := check(addr, caB.pool(), nil)
			return err
		})
		mustServe(t, addr, caB.pool(), nil, srvB.serial)
		if n := logs.count("reloaded TLS files"); n != 1 {
			t.Fatalf("%d reloads logged, want 1", n)
		}
	})

	t.Run("ReloadClientCA", func(t *testing.T) {
		srv := caA.issue(t, "server", true)
		f := writeFiles(t, srv, caA.pem)
		cfg, err := NewServerConfig(Config{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca,
			Logger: slog.New(&logRecorder{}), CheckInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		clientA := caA.issue(t, "client-a", false).tlsCert(t)
		clientB := caB.issue(t, "client-b", false).tlsCert(t)
		mustServe(t, addr, caA.pool(), &clientA, srv.serial)
		mustFail(t, addr, caA.pool(), &clientB)

		replaceFile(t, f.ca, append(append([]byte{}, caA.pem...), caB.pem...))
		eventually(t, "client of the added CA accepted", func() error {
			_, err := check(addr, caA.pool(), &clientB)
			return err
		})
		mustServe(t, addr, caA.pool(), &clientA, srv.serial)

		replaceFile(t, f.ca, caB.pem)
		eventually(t, "client of the removed CA refused", func() error {
			if _, err := check(addr, caA.pool(), &clientA); err == nil {
				return errors.New("still accepted")
			}
			return nil
		})
		mustFail(t, addr, caA.pool(), &clientA)
		mustServe(t, addr, caA.pool(), &clientB, srv.serial)
	})

	t.Run("CheckInterval", func(t *testing.T) {
		// Within the check interval the files are not looked at.
		srvA, srvB := caA.issue(t, "server-a", true), caB.issue(t, "server-b", true)
		f := writeFiles(t, srvA, nil)
		logs := &logRecorder{}
		cfg, err := NewServerConfig(Config{CertFile: f.cert, KeyFile: f.key, Logger: slog.New(logs), CheckInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		f.replaceServerCert(t, srvB)
		for range 3 {
			mustServe(t, addr, caA.pool(), nil, srvA.serial)
		}
		if n := logs.count(""); n != 0 {
			t.Fatalf("%d messages logged, want none", n)
		}
	})
}

// TestReloaderThrottle drives the reloader's clock directly: the files are
// checked at most once per interval, and a failed version is not retried
// until it changes.
func TestReloaderThrottle(t *testing.T) {
	ca := newCA(t, "ca")
	srvA, srvB := ca.issue(t, "server-a", true), ca.issue(t, "server-b", true)
	f := writeFiles(t, srvA, nil)
	logs := &logRecorder{}
	r := &reloader{certFile: f.cert, keyFile: f.key, log: slog.New(logs), interval: time.Second}
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	st, err := r.stat()
	if err != nil {
		t.Fatal(err)
	}
	if r.cur, err = r.load(); err != nil {
		t.Fatal(err)
	}
	r.loaded, r.lastCheck = st, now

	serial := func() *big.Int { return r.current().cert.Leaf.SerialNumber }

	f.replaceServerCert(t, srvB)
	now = now.Add(999 * time.Millisecond)
	if serial().Cmp(srvA.serial) != 0 {
		t.Fatal("reloaded before the interval passed")
	}
	now = now.Add(time.Millisecond)
	if serial().Cmp(srvB.serial) != 0 {
		t.Fatal("not reloaded once the interval passed")
	}

	writeFile(t, f.cert, []byte("garbage"))
	for range 3 {
		now = now.Add(time.Second)
		if serial().Cmp(srvB.serial) != 0 {
			t.Fatal("garbage file replaced the certificate")
		}
	}
	if n := logs.count(reloadFailed); n != 1 {
		t.Fatalf("%d reload failures logged, want 1", n)
	}
}
