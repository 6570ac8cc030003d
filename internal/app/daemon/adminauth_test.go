package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckAdminAccess(t *testing.T) {
	for _, tc := range []struct {
		addr, tokenFile string
		insecure        bool
		wantErr, warn   bool
	}{
		{addr: "127.0.0.1:19000"},
		{addr: "127.3.2.1:0"},
		{addr: "[::1]:19000"},
		{addr: "localhost:19000"},
		{addr: "LOCALHOST.:19000"},
		{addr: ":19000", wantErr: true},
		{addr: "0.0.0.0:19000", wantErr: true},
		{addr: "[::]:19000", wantErr: true},
		{addr: "10.1.2.3:19000", wantErr: true},
		{addr: "xdsd-0.internal:19000", wantErr: true},
		{addr: "[::ffff:10.0.0.1]:19000", wantErr: true},
		{addr: "not an address", wantErr: true},
		{addr: "0.0.0.0:19000", tokenFile: "/run/secrets/admin-token"},
		{addr: ":19000", insecure: true, warn: true},
		{addr: ":19000", tokenFile: "/run/secrets/admin-token", insecure: true},
		{addr: "127.0.0.1:19000", insecure: true},
	} {
		warning, err := checkAdminAccess(tc.addr, tc.tokenFile, tc.insecure)
		if (err != nil) != tc.wantErr || (warning != "") != tc.warn {
			t.Errorf("checkAdminAccess(%q, %q, %v) = %q, %v; want an error %v, a warning %v",
				tc.addr, tc.tokenFile, tc.insecure, warning, err, tc.wantErr, tc.warn)
		}
		if err != nil && !strings.Contains(err.Error(), "--admin-token-file") {
			t.Errorf("the error does not say what to do: %v", err)
		}
	}
}

// TestAdminNotLoopback checks that the daemon refuses to serve its admin
// endpoints on every address without a token, and warns when it does so
// insecurely.
func TestAdminNotLoopback(t *testing.T) {
	err := Run(context.Background(), Options{XDSAddr: "127.0.0.1:0", AdminAddr: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("Run with the admin endpoints on 0.0.0.0 and no token: %v, want a refusal", err)
	}
	var log logBuffer
	addrs := startDaemon(t, Options{AdminAddr: "0.0.0.0:0", AdminInsecure: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "without a token (--admin-insecure)") {
		t.Errorf("no warning:\n%s", log.String())
	}
	if code, _ := get(t, addrs.Admin, "/status", ""); code != http.StatusOK {
		t.Errorf("/status with --admin-insecure: %d, want 200", code)
	}
}

// TestAdminToken checks that with a token file every admin endpoint but
// the probes and the metrics needs the token, and that a new token in the
// file takes the old one's place.
func TestAdminToken(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	writeFile(t, tokenFile, "first-token\n")
	addrs := startDaemon(t, Options{AdminTokenFile: tokenFile})
	eventually(t, "/readyz 200", func() bool { code, _ := get(t, addrs.Admin, "/readyz", ""); return code == http.StatusOK })

	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(t, addrs.Admin, path, ""); code != http.StatusOK {
			t.Errorf("%s without a token: %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/status", "/config_dump?node=n1", "/debug/pprof/", "/debug/pprof/cmdline", "/nowhere", "/healthz/", "//status"} {
		for _, token := range []string{"", "wrong-token", "first-token-and-more"} {
			if code, _ := get(t, addrs.Admin, path, token); code != http.StatusUnauthorized {
				t.Errorf("%s with token %q: %d, want 401", path, token, code)
			}
		}
	}
	for _, path := range []string{"/status", "/config_dump?node=n1", "/debug/pprof/"} {
		if code, body := get(t, addrs.Admin, path, "first-token"); code != http.StatusOK {
			t.Errorf("%s with the token: %d %s, want 200", path, code, body)
		}
	}

	t.Run("the_401", func(t *testing.T) {
		for header, wantAuth := range map[string]string{
			"":                   `Bearer realm="xdsd"`,
			"Basic Zmlyc3Q=":     `Bearer realm="xdsd"`,
			"Bearer wrong-token": `Bearer realm="xdsd", error="invalid_token"`,
			"bearer first-token": "", // the scheme is case-insensitive
		} {
			req, err := http.NewRequest(http.MethodGet, "http://"+addrs.Admin+"/status", nil)
			if err != nil {
				t.Fatal(err)
			}
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := http.StatusUnauthorized
			if wantAuth == "" {
				want = http.StatusOK
			}
			if resp.StatusCode != want || resp.Header.Get("WWW-Authenticate") != wantAuth {
				t.Errorf("Authorization %q: %d, WWW-Authenticate %q; want %d, %q", header, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want, wantAuth)
			}
		}
	})

	t.Run("a_new_token", func(t *testing.T) {
		writeFile(t, tokenFile, "second-token")
		eventually(t, "the new token to take effect", func() bool {
			code, _ := get(t, addrs.Admin, "/status", "second-token")
			return code == http.StatusOK
		})
		if code, _ := get(t, addrs.Admin, "/status", "first-token"); code != http.StatusUnauthorized {
			t.Errorf("the old token after a new one: %d, want 401", code)
		}
		// Emptied, the file keeps the last token.
		if err := os.WriteFile(tokenFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _ := get(t, addrs.Admin, "/status", "second-token"); code != http.StatusOK {
			t.Errorf("the token after the file was emptied: %d, want 200", code)
		}
		if code, _ := get(t, addrs.Admin, "/status", ""); code != http.StatusUnauthorized {
			t.Errorf("no token after the file was emptied: %d, want 401", code)
		}
	})

	t.Run("a_bad_token_file", func(t *testing.T) {
		for what, content := range map[string]*string{"missing": nil, "empty": new(" \n")} {
			path := filepath.Join(t.TempDir(), "token")
			if content != nil {
				writeFile(t, path, *content)
			}
			err := Run(context.Background(), Options{XDSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", AdminTokenFile: path})
			if err == nil || !strings.Contains(err.Error(), "token file") {
				t.Errorf("Run with a %s token file: %v, want an error", what, err)
			}
		}
	})
}
