// Package tlsfiles builds the server-side TLS configuration for the xDS
// gRPC port from PEM files on disk: a certificate chain and its private
// key, and optionally a client CA bundle that turns on mutual TLS.
//
// The files are loaded once when the configuration is built (so a bad file
// is an error at start-up) and re-read afterwards, without a restart, when
// any of them changes on disk. Changes are detected lazily during TLS
// handshakes by comparing each file's size, modification time, change
// time (on Linux: a same-size rewrite with its modification time put back,
// by cp -p say, moves it) and identity (device and inode) from os.Stat, at
// most once per CheckInterval. A change
// that does not load (a file caught half-written, a certificate replaced
// before its key, garbage) is logged and the last good material keeps
// serving; the files are retried when they change again.
//
// Replacing a file by renaming a new one over it, as well as the symlink
// swap that Kubernetes uses for mounted Secrets, are detected, since os.Stat
// follows symlinks and a rename changes the inode.
package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/xdsd/xdsd/internal/filestamp"
)

// DefaultCheckInterval is the minimum time between two checks of the files
// when Config.CheckInterval is zero.
const DefaultCheckInterval = time.Second

// Config describes the files behind a server TLS configuration.
type Config struct {
	// CertFile holds the PEM certificate chain, leaf first (required).
	CertFile string
	// KeyFile holds the PEM private key of the leaf certificate (required).
	KeyFile string
	// ClientCAFile, if set, holds the PEM CA certificates that client
	// certificates must chain to; clients must then present a valid
	// certificate (mutual TLS). Empty means plain server-side TLS.
	ClientCAFile string
	// Logger receives reload and reload-failure logs; nil means
	// slog.Default().
	Logger *slog.Logger
	// CheckInterval is the minimum time between two checks of the files
	// for changes. Zero means DefaultCheckInterval; a negative value checks
	// on every handshake.
	CheckInterval time.Duration
	// NextProtos are the ALPN protocols offered; empty means "h2" alone,
	// as gRPC requires.
	NextProtos []string
}

// ServerConfig returns a server TLS configuration serving the certificate
// in certFile with the key in keyFile, and requiring client certificates
// signed by a CA from clientCAFile when clientCAFile is not empty. The files
// are reloaded when they change; see NewServerConfig.
func ServerConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	return NewServerConfig(Config{CertFile: certFile, KeyFile: keyFile, ClientCAFile: clientCAFile})
}

// NewServerConfig loads the files described by c and returns a server TLS
// configuration for them: TLS 1.2 at least, ALPN "h2" (as gRPC requires;
// or c.NextProtos),
// and, when c.ClientCAFile is set, ClientAuth RequireAndVerifyClientCert
// against the CAs in that file. It fails if a file cannot be read or
// parsed, or if the key does not match the certificate.
//
// The returned configuration resolves its certificate and client CA pool
// per handshake through GetConfigForClient, which re-reads the files when
// they changed. Settings made on the returned configuration before it is
// first used (cipher suites, curve preferences, ...) apply to every
// handshake; as with any tls.Config, it must not be modified afterwards.
func NewServerConfig(c Config) (*tls.Config, error) {
	if c.CertFile == "" || c.KeyFile == "" {
		return nil, errors.New("tlsfiles: certificate and key files are required")
	}
	r := &reloader{
		certFile:     c.CertFile,
		keyFile:      c.KeyFile,
		clientCAFile: c.ClientCAFile,
		log:          c.Logger,
		interval:     c.CheckInterval,
		now:          time.Now,
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.interval == 0 {
		r.interval = DefaultCheckInterval
	}
	stamps, err := r.stat()
	if err != nil {
		return nil, err
	}
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur, r.loaded, r.lastCheck = m, stamps, r.now()

	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		ClientAuth: tls.NoClientCert,
	}
	if len(c.NextProtos) > 0 {
		base.NextProtos = c.NextProtos
	}
	if c.ClientCAFile != "" {
		base.ClientAuth = tls.RequireAndVerifyClientCert
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := r.current()
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.Certificates = []tls.Certificate{*m.cert}
		cfg.ClientCAs = m.clientCAs
		return cfg, nil
	}
	return base, nil
}

// material is one consistent, successfully loaded set of files.
type material struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool // nil without a client CA file
}

// stamps identifies the versions of the watched files: certificate, key,
// client CA (nil when unused).
type stamps [3]os.FileInfo

func (s stamps) equal(o stamps) bool {
	for i := range s {
		if !filestamp.Same(s[i], o[i]) {
			return false
		}
	}
	return true
}

// reloader owns the current material and reloads it when the files change.
type reloader struct {
	certFile, keyFile, clientCAFile string
	log                             *slog.Logger
	interval                        time.Duration
	now                             func() time.Time

	// mu guards the fields below. current holds it while it looks at the
	// files and, when they changed, reloads them: handshakes at that
	// moment wait for the one reload rather than each do their own.
	mu        sync.Mutex
	cur       material
	loaded    stamps // versions cur was loaded from
	failed    stamps // versions that last failed to load; not retried
	hasFailed bool
	lastCheck time.Time
}

// current returns the material to serve, first reloading the files if the
// check interval has passed and they changed since the last load attempt.
func (r *reloader) current() material {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.interval > 0 && now.Sub(r.lastCheck) < r.interval && !now.Before(r.lastCheck) {
		return r.cur
	}
	r.lastCheck = now
	st, err := r.stat()
	if err != nil {
		// A file missing for a moment (mid-rename by a non-atomic
		// writer) or unreadable: keep serving and look again later.
		r.log.Warn("tlsfiles: cannot stat TLS files, keeping the previous certificate", "error", err)
		return r.cur
	}
	if st.equal(r.loaded) || (r.hasFailed && st.equal(r.failed)) {
		return r.cur
	}
	m, err := r.load()
	if err != nil {
		r.failed, r.hasFailed = st, true
		r.log.Error("tlsfiles: reloading TLS files failed, keeping the previous certificate",
			"cert", r.certFile, "key", r.keyFile, "client_ca", r.clientCAFile, "error", err)
		return r.cur
	}
	r.cur, r.loaded, r.hasFailed = m, st, false
	leaf := m.cert.Leaf
	r.log.Info("tlsfiles: reloaded TLS files",
		"cert", r.certFile, "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(),
		"not_after", leaf.NotAfter, "client_ca", r.clientCAFile)
	if now.After(leaf.NotAfter) {
		r.log.Warn("tlsfiles: the reloaded certificate has expired", "cert", r.certFile, "not_after", leaf.NotAfter)
	}
	return r.cur
}

// stat returns the current versions of the files. It is taken before the
// files are read, so a file still being written when read shows up as
// changed again at the next check.
func (r *reloader) stat() (stamps, error) {
	var s stamps
	for i, name := range [...]string{r.certFile, r.keyFile, r.clientCAFile} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return s, fmt.Errorf("tlsfiles: %w", err)
		}
		s[i] = fi
	}
	return s, nil
}

// load reads and validates all the files.
func (r *reloader) load() (material, error) {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return material{}, fmt.Errorf("tlsfiles: %w", err)
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return material{}, fmt.Errorf("tlsfiles: %w", err)
	}
	if _, err := parseCerts(certPEM); err != nil {
		return material{}, fmt.Errorf("tlsfiles: certificate file %s: %w", r.certFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return material{}, fmt.Errorf("tlsfiles: certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return material{}, fmt.Errorf("tlsfiles: certificate file %s: %w", r.certFile, err)
		}
	}
	m := material{cert: &cert}
	if r.clientCAFile != "" {
		caPEM, err := os.ReadFile(r.clientCAFile)
		if err != nil {
			return material{}, fmt.Errorf("tlsfiles: %w", err)
		}
		cas, err := parseCerts(caPEM)
		if err != nil {
			return material{}, fmt.Errorf("tlsfiles: client CA file %s: %w", r.clientCAFile, err)
		}
		m.clientCAs = x509.NewCertPool()
		for _, ca := range cas {
			m.clientCAs.AddCert(ca)
		}
	}
	return m, nil
}

// parseCerts parses every CERTIFICATE block of a PEM file. Unlike
// x509.CertPool.AppendCertsFromPEM it rejects a file with no certificate,
// a certificate that does not parse, or a truncated trailing block, so that
// a file caught half-written is not mistaken for a smaller bundle. Other
// block types and text between blocks are ignored.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			if bytes.Contains(data, []byte("-----BEGIN")) {
				return nil, errors.New("truncated or malformed PEM block")
			}
			break
		}
		data = rest
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}
