package authz

import (
	"context"
	"crypto/x509"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Identities returns the identities of a client certificate, in the order
// Policy.Decide tries them: its URI SANs, its DNS SANs, then its subject's
// common name (if not empty). A nil certificate has none.
func Identities(cert *x509.Certificate) []string {
	if cert == nil {
		return nil
	}
	ids := make([]string, 0, len(cert.URIs)+len(cert.DNSNames)+1)
	for _, u := range cert.URIs {
		ids = append(ids, u.String())
	}
	ids = append(ids, cert.DNSNames...)
	if cn := cert.Subject.CommonName; cn != "" {
		ids = append(ids, cn)
	}
	return ids
}

// Identity returns the identity a certificate is shown by: its first
// URI SAN, else its first DNS SAN, else its common name; "" for nil.
func Identity(cert *x509.Certificate) string {
	if ids := Identities(cert); len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// PeerCertificate returns the verified client certificate of the peer in
// ctx (peer.FromContext, whose AuthInfo is a credentials.TLSInfo on a TLS
// connection, as both gRPC transports and the REST handler set it), or nil
// if there is none: no TLS, no client certificate, or one that was not
// verified against a client CA.
func PeerCertificate(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok || p == nil {
		return nil
	}
	var info credentials.TLSInfo
	switch a := p.AuthInfo.(type) {
	case credentials.TLSInfo:
		info = a
	case *credentials.TLSInfo:
		if a == nil {
			return nil
		}
		info = *a
	default:
		return nil
	}
	if len(info.State.VerifiedChains) == 0 || len(info.State.PeerCertificates) == 0 {
		return nil
	}
	return info.State.PeerCertificates[0]
}
