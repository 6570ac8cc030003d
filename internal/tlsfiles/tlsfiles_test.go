package tlsfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/xdsd/xdsd/internal/testutil/testcerts"
)

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
func writeFiles(t *testing.T, server testcerts.Issued, clientCA []byte) files {
	t.Helper()
	dir := t.TempDir()
	f := files{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key")}
	writeFile(t, f.cert, server.CertPEM)
	writeFile(t, f.key, server.KeyPEM)
	if clientCA != nil {
		f.ca = filepath.Join(dir, "ca.crt")
		writeFile(t, f.ca, clientCA)
	}
	return f
}

// replaceServerCert atomically replaces the certificate and key files.
func (f files) replaceServerCert(t *testing.T, c testcerts.Issued) {
	t.Helper()
	replaceFile(t, f.key, c.KeyPEM)
	replaceFile(t, f.cert, c.CertPEM)
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
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
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
	caA, caB := testcerts.NewCA(t, "ca-a"), testcerts.NewCA(t, "ca-b")

	t.Run("Config", func(t *testing.T) {
		f := writeFiles(t, caA.Issue(t, "server", true), caA.CertPEM)
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
		good := caA.Issue(t, "server", true)
		other := caA.Issue(t, "other", true)
		dir := t.TempDir()
		path := func(name string, data []byte) string {
			p := filepath.Join(dir, name)
			writeFile(t, p, data)
			return p
		}
		cert, key := path("cert.pem", good.CertPEM), path("key.pem", good.KeyPEM)
		caFile := path("ca.pem", caA.CertPEM)
		missing := filepath.Join(dir, "missing.pem")
		garbage := path("garbage.pem", []byte("not a certificate\n"))
		truncCert := path("trunc-cert.pem", good.CertPEM[:len(good.CertPEM)/2])
		truncCA := path("trunc-ca.pem", append(append([]byte{}, caA.CertPEM...), caB.CertPEM[:len(caB.CertPEM)/2]...))
		otherKey := path("other-key.pem", other.KeyPEM)
		keyAsCA := path("key-as-ca.pem", good.KeyPEM)
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
		srv := caA.Issue(t, "server", true)
		f := writeFiles(t, srv, nil)
		cfg, err := ServerConfig(f.cert, f.key, "")
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		mustServe(t, addr, caA.Pool(), nil, srv.Cert.SerialNumber)
		mustFail(t, addr, caB.Pool(), nil)
		mustFail(t, addr, x509.NewCertPool(), nil)
	})

	t.Run("MutualTLS", func(t *testing.T) {
		srv := caA.Issue(t, "server", true)
		f := writeFiles(t, srv, caA.CertPEM)
		cfg, err := ServerConfig(f.cert, f.key, f.ca)
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		good := caA.Issue(t, "client-a", false).TLSCertificate(t)
		bad := caB.Issue(t, "client-b", false).TLSCertificate(t)
		mustServe(t, addr, caA.Pool(), &good, srv.Cert.SerialNumber)
		mustFail(t, addr, caA.Pool(), nil)
		mustFail(t, addr, caA.Pool(), &bad)
		mustFail(t, addr, caB.Pool(), &good) // and the server is still checked

		// With TLS 1.3 a refused client certificate surfaces on the
		// client only as a broken connection; TLS 1.2 shows the server's
		// handshake alert.
		for _, c := range []*tls.Certificate{nil, &bad} {
			_, err := checkMax(addr, caA.Pool(), c, tls.VersionTLS12)
			if err == nil || !strings.Contains(err.Error(), "remote error: tls:") {
				t.Errorf("TLS 1.2 with client cert %v: %v, want a TLS alert from the server", c != nil, err)
			} else {
				t.Logf("refused as expected: %v", err)
			}
		}
		mustServeMax := func(c *tls.Certificate) {
			t.Helper()
			if _, err := checkMax(addr, caA.Pool(), c, tls.VersionTLS12); err != nil {
				t.Fatalf("TLS 1.2: %v", err)
			}
		}
		mustServeMax(&good)
	})

	t.Run("ReloadServerCert", func(t *testing.T) {
		// The default check interval: the new certificate shows up
		// within about a second.
		srvA, srvB := caA.Issue(t, "server-a", true), caB.Issue(t, "server-b", true)
		f := writeFiles(t, srvA, nil)
		cfg, err := ServerConfig(f.cert, f.key, "")
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		mustServe(t, addr, caA.Pool(), nil, srvA.Cert.SerialNumber)
		mustFail(t, addr, caB.Pool(), nil)

		f.replaceServerCert(t, srvB)
		eventually(t, "client trusting only the new CA", func() error {
			_, err := check(addr, caB.Pool(), nil)
			return err
		})
		mustServe(t, addr, caB.Pool(), nil, srvB.Cert.SerialNumber)
		mustFail(t, addr, caA.Pool(), nil)
	})

	t.Run("BadFilesKeepServing", func(t *testing.T) {
		srvA, srvB := caA.Issue(t, "server-a", true), caB.Issue(t, "server-b", true)
		f := writeFiles(t, srvA, nil)
		logs := &logRecorder{}
		cfg, err := NewServerConfig(Config{CertFile: f.cert, KeyFile: f.key, Logger: slog.New(logs), CheckInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		mustServe(t, addr, caA.Pool(), nil, srvA.Cert.SerialNumber)

		// Each bad version of the files is reported once and the old
		// certificate keeps serving.
		for i, bad := range []struct {
			name string
			edit func()
		}{
			{"half-written cert", func() { writeFile(t, f.cert, srvB.CertPEM[:len(srvB.CertPEM)/2]) }},
			{"garbage cert", func() { writeFile(t, f.cert, []byte("garbage\n")) }},
			{"empty cert", func() { writeFile(t, f.cert, nil) }},
			{"new cert with old key", func() { replaceFile(t, f.cert, srvB.CertPEM) }},
		} {
			bad.edit()
			want := i + 1
			eventually(t, bad.name+": reload failure logged", func() error {
				mustServe(t, addr, caA.Pool(), nil, srvA.Cert.SerialNumber)
				if n := logs.count(reloadFailed); n != want {
					return fmt.Errorf("%d reload failures logged, want %d", n, want)
				}
				return nil
			})
			mustServe(t, addr, caA.Pool(), nil, srvA.Cert.SerialNumber)
			mustFail(t, addr, caB.Pool(), nil)
			if n := logs.count(reloadFailed); n != want {
				t.Fatalf("%s: %d reload failures logged, want %d", bad.name, n, want)
			}
		}

		// The matching key completes the pair.
		replaceFile(t, f.key, srvB.KeyPEM)
		eventually(t, "new certificate served", func() error {
			_, err := check(addr, caB.Pool(), nil)
			return err
		})
		mustServe(t, addr, caB.Pool(), nil, srvB.Cert.SerialNumber)
		if n := logs.count("reloaded TLS files"); n != 1 {
			t.Fatalf("%d reloads logged, want 1", n)
		}
	})

	t.Run("ReloadClientCA", func(t *testing.T) {
		srv := caA.Issue(t, "server", true)
		f := writeFiles(t, srv, caA.CertPEM)
		cfg, err := NewServerConfig(Config{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca,
			Logger: slog.New(&logRecorder{}), CheckInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		clientA := caA.Issue(t, "client-a", false).TLSCertificate(t)
		clientB := caB.Issue(t, "client-b", false).TLSCertificate(t)
		mustServe(t, addr, caA.Pool(), &clientA, srv.Cert.SerialNumber)
		mustFail(t, addr, caA.Pool(), &clientB)

		replaceFile(t, f.ca, append(append([]byte{}, caA.CertPEM...), caB.CertPEM...))
		eventually(t, "client of the added CA accepted", func() error {
			_, err := check(addr, caA.Pool(), &clientB)
			return err
		})
		mustServe(t, addr, caA.Pool(), &clientA, srv.Cert.SerialNumber)

		replaceFile(t, f.ca, caB.CertPEM)
		eventually(t, "client of the removed CA refused", func() error {
			if _, err := check(addr, caA.Pool(), &clientA); err == nil {
				return errors.New("still accepted")
			}
			return nil
		})
		mustFail(t, addr, caA.Pool(), &clientA)
		mustServe(t, addr, caA.Pool(), &clientB, srv.Cert.SerialNumber)
	})

	t.Run("CheckInterval", func(t *testing.T) {
		// Within the check interval the files are not looked at.
		srvA, srvB := caA.Issue(t, "server-a", true), caB.Issue(t, "server-b", true)
		f := writeFiles(t, srvA, nil)
		logs := &logRecorder{}
		cfg, err := NewServerConfig(Config{CertFile: f.cert, KeyFile: f.key, Logger: slog.New(logs), CheckInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		addr := startServer(t, cfg)
		f.replaceServerCert(t, srvB)
		for range 3 {
			mustServe(t, addr, caA.Pool(), nil, srvA.Cert.SerialNumber)
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
	ca := testcerts.NewCA(t, "ca")
	srvA, srvB := ca.Issue(t, "server-a", true), ca.Issue(t, "server-b", true)
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
	if serial().Cmp(srvA.Cert.SerialNumber) != 0 {
		t.Fatal("reloaded before the interval passed")
	}
	now = now.Add(time.Millisecond)
	if serial().Cmp(srvB.Cert.SerialNumber) != 0 {
		t.Fatal("not reloaded once the interval passed")
	}

	writeFile(t, f.cert, []byte("garbage"))
	for range 3 {
		now = now.Add(time.Second)
		if serial().Cmp(srvB.Cert.SerialNumber) != 0 {
			t.Fatal("garbage file replaced the certificate")
		}
	}
	if n := logs.count(reloadFailed); n != 1 {
		t.Fatalf("%d reload failures logged, want 1", n)
	}
}
