package e2e_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

// The command line.

// TestDaemon_CLI checks xdsd's commands, flags and XDSD_* variables.
func TestDaemon_CLI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	t.Run("version", func(t *testing.T) {
		code, stdout, stderr := runXDSD(ctx, t, nil, "version")
		if code != 0 || stdout != "xdsd "+testVersion+"\n" {
			t.Errorf("xdsd version: status %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, "xdsd "+testVersion+"\n")
		}
	})

	t.Run("serve_help", func(t *testing.T) {
		code, stdout, stderr := runXDSD(ctx, t, nil, "serve", "--help")
		if code != 0 {
			t.Errorf("xdsd serve --help: status %d, want 0", code)
		}
		help := stdout + stderr
		for _, flag := range []string{"config-dir", "xds-addr", "admin-addr", "rest-addr", "rest-poll-timeout",
			"write-dir", "write-format", "write-node", "tls-cert", "tls-key", "client-ca", "log-level",
			"log-format", "shutdown-grace", "admin-token-file", "admin-insecure", "admin-show-secrets"} {
			if !strings.Contains(help, "  -"+flag+" ") && !strings.Contains(help, "  -"+flag+"\n") {
				t.Errorf("xdsd serve --help does not list -%s", flag)
			}
		}
		if !strings.Contains(help, "XDSD_CONFIG_DIR") {
			t.Errorf("xdsd serve --help does not mention XDSD_CONFIG_DIR")
		}
		if t.Failed() {
			t.Logf("help:\n%s", help)
		}
	})

	for _, tc := range []struct {
		name       string
		env        []string
		args       []string
		wantStderr string
	}{
		{"unknown_flag", nil, []string{"serve", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{"unknown_command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"no_command", nil, nil, "Usage:"},
		{"extra_argument", nil, []string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "", "stray"}, "unexpected arguments"},
		{"bad_env_value", []string{"XDSD_REST_POLL_TIMEOUT=soon"}, []string{"serve"}, "XDSD_REST_POLL_TIMEOUT"},
		{"bad_log_level", nil, []string{"serve", "--log-level", "loud"}, "--log-level"},
		{"admin_not_loopback_without_a_token", nil, []string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "0.0.0.0:0"},
			"is not a loopback address"},
		{"admin_token_file_missing", []string{"XDSD_ADMIN_TOKEN_FILE=no-such-token-file"}, []string{"serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
			"no-such-token-file"},
		{"config_dir_is_a_file", nil, []string{"serve", "--config-dir", "daemon_cli_test.go", "--xds-addr", "127.0.0.1:0", "--admin-addr", ""},
			"config dir daemon_cli_test.go is a file, not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runXDSD(ctx, t, tc.env, tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("xdsd %q: status %d, stdout %q, stderr %q; want non-zero and %q", tc.args, code, stdout, stderr, tc.wantStderr)
			}
		})
	}

	// XDSD_XDS_ADDR and XDSD_CONFIG_DIR stand in for their flags; a flag
	// given on the command line wins over its variable.
	t.Run("env_XDSD_XDS_ADDR", func(t *testing.T) {
		cfg := newConfigDir(t)
		cfg.writeService(dummyA)
		d := startReady(t, []string{
			"XDSD_XDS_ADDR=127.0.0.1:0",
			"XDSD_CONFIG_DIR=" + cfg.dir,
			"XDSD_ADMIN_ADDR=not-an-address", // overridden by --admin-addr
		}, "serve", "--admin-addr", "127.0.0.1:0")
		if host, _, err := net.SplitHostPort(d.xds); err != nil || host != "127.0.0.1" {
			t.Errorf("xDS address %q, want 127.0.0.1:<port> from XDSD_XDS_ADDR", d.xds)
		}
		resp, err := fetchClusters(ctx, d.xds, insecure.NewCredentials())
		if err != nil {
			t.Fatalf("fetching clusters: %v", err)
		}
		sameResources(t, "clusters", resp.GetResources(), cfg.byType()[cds])
		if code, _ := d.get(ctx, t, "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz = %d, want 200", code)
		}
	})
}
