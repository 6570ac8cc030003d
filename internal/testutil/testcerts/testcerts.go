// Package testcerts makes throwaway X.509 certificate authorities and
// certificates for tests: ECDSA P-256 keys, certificates valid from an hour
// ago for a day, PEM-encoded certificates and PKCS #8 keys.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"
)

// CA is a self-signed certificate authority made for a test.
type CA struct {
	// Cert is the CA's parsed certificate.
	Cert *x509.Certificate
	// Key is the CA's private key, which signs the certificates it issues.
	Key *ecdsa.PrivateKey
	// CertPEM is Cert as a PEM "CERTIFICATE" block.
	CertPEM []byte
}

// Issued is a certificate issued by a CA, with its private key.
type Issued struct {
	// Cert is the parsed certificate; Cert.SerialNumber tells it apart
	// from other certificates of the same CA.
	Cert *x509.Certificate
	// CertPEM is Cert as a PEM "CERTIFICATE" block.
	CertPEM []byte
	// KeyPEM is the certificate's private key as a PEM "PRIVATE KEY"
	// (PKCS #8) block.
	KeyPEM []byte
}

// NewCA returns a new self-signed CA with the common name name. It fails
// the test on error.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
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
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der)}
}

// Pool returns a new certificate pool holding only c's certificate.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// Issue returns a new certificate with the common name name, signed by c.
// If server, it is a server certificate (ServerAuth usage) for 127.0.0.1,
// ::1 and localhost; otherwise it is a client certificate (ClientAuth
// usage). It fails the test on error.
func (c *CA) Issue(t testing.TB, name string, server bool) Issued {
	t.Helper()
	key := newKey(t)
	tmpl := clientTemplate(t, name)
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	return c.issue(t, tmpl, key)
}

// IssueClient returns a new client certificate signed by c with the
// common name cn (none if empty), the URI SANs uris and the DNS SANs
// dnsNames. It fails the test on error.
func (c *CA) IssueClient(t testing.TB, cn string, uris, dnsNames []string) Issued {
	t.Helper()
	tmpl := clientTemplate(t, cn)
	tmpl.DNSNames = dnsNames
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return c.issue(t, tmpl, newKey(t))
}

// clientTemplate is the template of a client certificate for name.
func clientTemplate(t testing.TB, name string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: newSerial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// issue signs tmpl's certificate, for key, with c.
func (c *CA) issue(t testing.TB, tmpl *x509.Certificate, key *ecdsa.PrivateKey) Issued {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Issued{
		Cert:    cert,
		CertPEM: encodeCert(der),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// TLSCertificate returns i as a tls.Certificate, for a tls.Config's
// Certificates. It fails the test on error.
func (i Issued) TLSCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(i.CertPEM, i.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newSerial returns a random positive serial number of at most 127 bits.
func newSerial(t testing.TB) *big.Int {
	t.Helper()
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return s.Add(s, big.NewInt(1))
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
