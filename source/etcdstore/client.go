package etcdstore

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ClientConfig is how to reach etcd.
type ClientConfig struct {
	// Endpoints are etcd's client URLs (http://host:port, or https://
	// with TLS).
	Endpoints []string
	// CA is a PEM CA bundle that etcd's certificate must chain to; with it
	// the connection is TLS. Cert and Key, PEM files, are the client
	// certificate etcd may require.
	CA, Cert, Key string
	// DialTimeout bounds the first connection; zero means five seconds.
	DialTimeout time.Duration
}

// NewClient returns an etcd client for cfg. It does not wait for etcd: a
// client made while etcd is down connects when etcd comes up.
func NewClient(cfg ClientConfig) (*clientv3.Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, errors.New("etcd: a client certificate needs its key, and a key its certificate")
	}
	var tc *tls.Config
	if cfg.CA != "" || cfg.Cert != "" {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CA != "" {
			pem, err := os.ReadFile(cfg.CA)
			if err != nil {
				return nil, fmt.Errorf("etcd CA: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("etcd CA %s: no PEM certificate", cfg.CA)
			}
		}
		if cfg.Cert != "" {
			cert, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
			if err != nil {
				return nil, fmt.Errorf("etcd client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cmp.Or(cfg.DialTimeout, 5*time.Second),
		TLS:         tc,
		Logger:      zap.NewNop(), // failures reach xdsd's log through the replica
		// A client cut off from etcd finds out within seconds.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	})
}
