package xdsctl

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
)

// TestSecretsRedacted checks that get, watch and dump print secret
// material as "[redacted]", and get and watch as the server sent it with
// --show-secrets.
func TestSecretsRedacted(t *testing.T) {
	cert := testcerts.NewCA(t, "test CA").Issue(t, "server", true)
	keyLine := strings.Split(string(cert.KeyPEM), "\n")[1]
	q := func(s []byte) string { b, _ := json.Marshal(string(s)); return string(b) }
	dir := configDir(t)
	writeFile(t, dir, "secret.yaml", `"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
name: server-cert
tls_certificate:
  certificate_chain: {inline_string: `+q(cert.CertPEM)+`}
  private_key: {inline_string: `+q(cert.KeyPEM)+`}
`)
	addrs := startXDSD(t, daemon.Options{ConfigDir: dir})
	xds := []string{"--server", addrs.XDS, "--type", "sds"}
	for _, tc := range []struct {
		name string
		args []string
		show bool // the key is printed
	}{
		{"get", append([]string{"get", "--timeout", "5s"}, append(xds, "server-cert")...), false},
		{"get_show_secrets", append([]string{"get", "--timeout", "5s", "--show-secrets"}, append(xds, "server-cert")...), true},
		{"get_json", append([]string{"get", "--timeout", "5s", "--output", "json"}, append(xds, "server-cert")...), false},
		{"watch", append([]string{"watch", "--count", "1"}, append(xds, "server-cert")...), false},
		{"watch_show_secrets", append([]string{"watch", "--count", "1", "--show-secrets", "--delta"}, append(xds, "server-cert")...), true},
		{"dump", []string{"dump", "--admin", addrs.Admin, "--node", "n1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := run(tc.args...)
			if code != 0 || !strings.Contains(out, "server-cert") || !strings.Contains(out, "BEGIN CERTIFICATE") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want the secret, its certificate shown", code, out, errs)
			}
			if shown := strings.Contains(out, keyLine); shown != tc.show {
				t.Errorf("the private key shown: %v, want %v:\n%s", shown, tc.show, out)
			}
			if redacted := strings.Contains(out, "[redacted]"); redacted == tc.show {
				t.Errorf("[redacted] printed: %v, want %v:\n%s", redacted, !tc.show, out)
			}
		})
	}
}

// TestAdminToken checks that status and dump send the token of
// --admin-token-file, and say what is wrong without it.
func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "admin-token", "the-admin-token\n")
	writeFile(t, dir, "other-token", "another-token")
	addrs := startXDSD(t, daemon.Options{ConfigDir: configDir(t), AdminTokenFile: filepath.Join(dir, "admin-token")})
	for _, args := range [][]string{{"status"}, {"dump", "--node", "n1"}} {
		args = append(args, "--admin", addrs.Admin)
		if code, out, errs := run(append(args, "--admin-token-file", filepath.Join(dir, "admin-token"))...); code != 0 || out == "" {
			t.Errorf("%s with the token: exit %d, stdout %q, stderr %q", args[0], code, out, errs)
		}
		for what, tc := range map[string]struct {
			args []string
			want string
		}{
			"no token":      {args, "401 Unauthorized: give --admin-token-file"},
			"another token": {append(args, "--admin-token-file", filepath.Join(dir, "other-token")), "is not xdsd's"},
			"no such file":  {append(args, "--admin-token-file", filepath.Join(dir, "nope")), "--admin-token-file: open"},
		} {
			if code, _, errs := run(tc.args...); code != exitFail || !strings.Contains(errs, tc.want) {
				t.Errorf("%s, %s: exit %d, stderr %q; want 1 and %q", args[0], what, code, errs, tc.want)
			}
		}
	}
}
