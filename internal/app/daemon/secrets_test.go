package daemon

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/testcerts"
)

// quote writes s as a YAML double-quoted scalar.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// secretConfig returns the files of a configuration that holds the
// private key keyPEM in a Secret and in a listener's TLS context, and a
// generic secret.
func secretConfig(certPEM, keyPEM string) map[string]string {
	return map[string]string{
		"secrets.yaml": `resources:
- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: server-cert
  tls_certificate:
    certificate_chain: {inline_string: ` + quote(certPEM) + `}
    private_key: {inline_string: ` + quote(keyPEM) + `}
- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: hmac
  generic_secret: {secret: {inline_string: "generic-secret-value"}}
`,
		"listener.yaml": `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: https
address: {socket_address: {address: 0.0.0.0, port_value: 8443}}
filter_chains:
- transport_socket:
    name: envoy.transport_sockets.tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
      common_tls_context:
        tls_certificates:
        - certificate_chain: {inline_string: ` + quote(certPEM) + `}
          private_key: {inline_string: ` + quote(keyPEM) + `}
`,
	}
}

// TestConfigDumpRedacts checks that /config_dump shows secret material as
// "[redacted]", in Secrets and in a listener's typed_config, unless
// AdminShowSecrets, and that the files of WriteDir, which Envoy reads,
// hold it.
func TestConfigDumpRedacts(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	cert := ca.Issue(t, "server", true)
	keyLine := strings.Split(string(cert.KeyPEM), "\n")[1] // base64 of the key
	dir, out := t.TempDir(), t.TempDir()
	for name, content := range secretConfig(string(cert.CertPEM), string(cert.KeyPEM)) {
		writeFile(t, filepath.Join(dir, name), content)
	}

	t.Run("redacted", func(t *testing.T) {
		addrs := startDaemon(t, Options{ConfigDir: dir, WriteDir: out})
		body := configDump(t, addrs.Admin, "/config_dump", "server-cert", "https")
		if strings.Contains(body, keyLine) || strings.Contains(body, "generic-secret-value") {
			t.Errorf("/config_dump shows secret material:\n%s", body)
		}
		if n := strings.Count(body, `"[redacted]"`); n != 3 {
			t.Errorf("/config_dump has %d \"[redacted]\", want 3 (the Secret's key, the generic secret, the listener's key):\n%s", n, body)
		}
		if !strings.Contains(body, "BEGIN CERTIFICATE") {
			t.Errorf("/config_dump hides the certificates, which are not secret:\n%s", body)
		}
		for _, name := range []string{"sds.yaml", "lds.yaml"} {
			var b []byte
			eventually(t, "--write-dir's "+name, func() bool {
				var err error
				b, err = os.ReadFile(filepath.Join(out, name))
				return err == nil
			})
			if !strings.Contains(string(b), keyLine) {
				t.Errorf("%s, for Envoy, lacks the private key:\n%s", name, b)
			}
		}
	})

	t.Run("AdminShowSecrets", func(t *testing.T) {
		var log logBuffer
		addrs := startDaemon(t, Options{ConfigDir: dir, AdminShowSecrets: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		body := configDump(t, addrs.Admin, "/config_dump", "server-cert", "https")
		if !strings.Contains(body, keyLine) || !strings.Contains(body, "generic-secret-value") || strings.Contains(body, "[redacted]") {
			t.Errorf("/config_dump with AdminShowSecrets does not show the secrets:\n%s", body)
		}
		if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "secret material in clear") {
			t.Errorf("no warning at start-up:\n%s", log.String())
		}
	})
}

// TestRejectedSecretNotShown checks that a Secret file that does not load
// is reported, in the log and in /status, without its private key.
func TestRejectedSecretNotShown(t *testing.T) {
	key := string(testcerts.NewCA(t, "test CA").Issue(t, "server", true).KeyPEM)
	keyLine := strings.Split(key, "\n")[1]
	dir := t.TempDir()
	// inline_bytes wants base64: protojson's error quotes the value.
	writeFile(t, filepath.Join(dir, "secret.yaml"), `"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
name: server-cert
tls_certificate: {private_key: {inline_bytes: `+quote(key)+`}}
`)
	var log logBuffer
	addrs := startDaemon(t, Options{ConfigDir: dir, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	var rep StatusReport
	eventually(t, "the load error in /status", func() bool {
		code, body := get(t, addrs.Admin, "/status", "")
		if strings.Contains(body, keyLine) {
			t.Fatalf("/status shows the private key:\n%s", body)
		}
		return code == http.StatusOK && json.Unmarshal([]byte(body), &rep) == nil && rep.Config.LastError != ""
	})
	if want := "secret.yaml: sds \"server-cert\": tls_certificate.private_key.inline_bytes: invalid value for bytes field inlineBytes: [redacted]"; !strings.Contains(rep.Config.LastError, want) {
		t.Errorf("last_error %q, want %q in it", rep.Config.LastError, want)
	}
	eventually(t, "the rejection in the log", func() bool { return strings.Contains(log.String(), "configuration rejected") })
	if l := log.String(); strings.Contains(l, keyLine) {
		t.Errorf("the log shows the private key:\n%s", l)
	}
}
