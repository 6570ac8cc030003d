// Package etcdtest runs a real etcd server for tests: the etcd binary
// (Debian's etcd-server package installs /usr/bin/etcd), on loopback, with
// a temporary data directory. A test can kill it, as a crash would, and
// start it again on the same address and data.
package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// RequiredEnv names the environment variable that, set to "required",
// makes a missing etcd binary fail a test rather than skip it (CI sets
// it).
const RequiredEnv = "XDSD_ETCD"

// StartTimeout bounds the wait for a started etcd to answer.
const StartTimeout = 30 * time.Second

// Server is a running etcd. Its methods may be called from one goroutine
// at a time.
type Server struct {
	// Endpoint is the client URL (http://127.0.0.1:port).
	Endpoint string
	t        testing.TB
	bin      string
	dir      string
	peerURL  string
	tls      *TLS       // nil: plain HTTP
	mu       sync.Mutex // guards cmd and done
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
}

// TLS makes the server serve its clients over TLS with the PEM files
// CertFile and KeyFile, and require client certificates signed by the
// CAFile's CA; Client then presents ClientCert (a tls.Config's).
type TLS struct {
	CertFile, KeyFile, CAFile string
	// Client is the configuration of the server's own clients (Client,
	// and the wait for it to answer).
	Client *tls.Config
}

// Start starts an etcd for the test, stopped when the test ends. It skips
// the test if there is no etcd binary, unless RequiredEnv says otherwise.
func Start(t testing.TB) *Server { return StartTLS(t, nil) }

// StartTLS is Start for a server that serves its clients over TLS, if tc
// is not nil.
func StartTLS(t testing.TB, tc *TLS) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv(RequiredEnv) == "required" {
			t.Fatalf("no etcd binary (%v); install Debian's etcd-server", err)
		}
		t.Skipf("no etcd binary (%v); install Debian's etcd-server", err)
	}
	scheme := "http://"
	if tc != nil {
		scheme = "https://"
	}
	s := &Server{
		t: t, bin: bin, dir: t.TempDir(), tls: tc,
		Endpoint: scheme + freeAddr(t),
		peerURL:  "http://" + freeAddr(t),
	}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs etcd and waits until it answers.
func (s *Server) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin,
		"--name", "test",
		"--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", s.Endpoint,
		"--advertise-client-urls", s.Endpoint,
		"--listen-peer-urls", s.peerURL,
		"--initial-advertise-peer-urls", s.peerURL,
		"--initial-cluster", "test="+s.peerURL,
		"--logger", "zap", "--log-level", "error",
	)
	if s.tls != nil {
		cmd.Args = append(cmd.Args, "--cert-file", s.tls.CertFile, "--key-file", s.tls.KeyFile,
			"--trusted-ca-file", s.tls.CAFile, "--client-cert-auth")
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatalf("starting etcd: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	c := s.Client()
	defer c.Close()
	deadline := time.Now().Add(StartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "etcd.log"))
			s.t.Fatalf("etcd exited at start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("etcd at %s does not answer after %v: %v", s.Endpoint, StartTimeout, err)
		}
	}
}

// Kill stops etcd at once (SIGKILL), as a crash would, and waits for it to
// exit. Its data stay for Restart.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts a killed etcd again on the same address and data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// Client returns a client of the server; the caller closes it.
func (s *Server) Client() *clientv3.Client {
	s.t.Helper()
	var tc *tls.Config
	if s.tls != nil {
		tc = s.tls.Client
	}
	return newClient(s.t, s.Endpoint, tc)
}

// NewClient returns a client of the etcd at endpoint, quiet; the caller
// closes it.
func NewClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	return newClient(t, endpoint, nil)
}

func newClient(t testing.TB, endpoint string, tc *tls.Config) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		TLS:         tc,
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	return c
}

// String names the server in messages.
func (s *Server) String() string { return fmt.Sprintf("etcd at %s", s.Endpoint) }

// Proxy forwards TCP connections to an address, and can cut them: a
// network partition between a client and etcd, made on loopback.
type Proxy struct {
	// Endpoint is the proxy's URL (http://127.0.0.1:port).
	Endpoint string
	t        testing.TB
	addr     string // the proxy's own address
	to       string // where it forwards
	mu       sync.Mutex
	lis      net.Listener // nil while cut
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

// NewProxy starts a proxy to s, stopped when the test ends.
func (s *Server) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	p := &Proxy{t: t, to: strings.TrimPrefix(s.Endpoint, "http://"), conns: make(map[net.Conn]bool)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = lis.Addr().String()
	p.Endpoint = "http://" + p.addr
	p.serve(lis)
	t.Cleanup(func() {
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// serve accepts on lis until it is closed.
func (p *Proxy) serve(lis net.Listener) {
	p.mu.Lock()
	p.lis = lis
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.lis != lis { // cut meanwhile
				p.mu.Unlock()
				c.Close()
				up.Close()
				return
			}
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			p.wg.Go(func() { pipe(up, c) })
			p.wg.Go(func() { pipe(c, up) })
		}
	})
}

// Cut closes every connection through the proxy and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lis != nil {
		p.lis.Close()
		p.lis = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore accepts connections again after Cut, on the same address.
func (p *Proxy) Restore() {
	p.t.Helper()
	lis, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listening again on %s: %v", p.addr, err)
	}
	p.serve(lis)
}
