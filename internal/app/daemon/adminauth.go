package daemon

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/xdsd/xdsd/internal/tokenfile"
)

// openAdminPaths are the admin endpoints served without a token: probes
// and metrics, which tell nothing of the configuration.
var openAdminPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// checkAdminAccess says whether the admin endpoints may serve on addr:
// on an address that is not a loopback one (anything but 127.0.0.0/8,
// ::1 and localhost; ":19000" and "0.0.0.0:19000" are every address),
// only with a token file, or insecure, which returns a warning to log.
func checkAdminAccess(addr, tokenFile string, insecure bool) (warning string, err error) {
	if tokenFile != "" || loopback(addr) {
		return "", nil
	}
	if !insecure {
		return "", fmt.Errorf("the admin address %s is not a loopback address, and its endpoints show every node's configuration: "+
			"give --admin-token-file FILE (a bearer token the requests to /status, /config_dump and /debug/pprof must bear), "+
			"listen on 127.0.0.1, or --admin-insecure to serve them to anyone who can reach it", addr)
	}
	return fmt.Sprintf("the admin endpoints serve on %s, not a loopback address, without a token (--admin-insecure): "+
		"anyone who can reach it sees every node's configuration", addr), nil
}

// loopback reports whether addr (host:port) is on a loopback address:
// 127.0.0.0/8, ::1 or localhost. An empty host is every address; another
// name may resolve to any.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// requireToken returns h, which answers every request but those of
// openAdminPaths only if it bears the token of tf ("Authorization: Bearer
// <token>"), and 401 otherwise. A nil tf requires nothing.
func requireToken(h http.Handler, tf *tokenfile.File) http.Handler {
	if tf == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openAdminPaths[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="xdsd"`)
			http.Error(w, "this admin endpoint needs a bearer token (Authorization: Bearer <token>; xdsctl --admin-token-file)", http.StatusUnauthorized)
			return
		}
		// Hashed first, the two compare in a time that depends on neither.
		want, have := sha256.Sum256([]byte(tf.Token())), sha256.Sum256([]byte(strings.TrimSpace(got)))
		if subtle.ConstantTimeCompare(want[:], have[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="xdsd", error="invalid_token"`)
			http.Error(w, "the bearer token is not the admin token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
