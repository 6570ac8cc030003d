package daemon

import (
	"path/filepath"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/internal/testutil/golden"
)

// configDumpDir is the fixture configuration of TestConfigDumpGolden: a
// cluster and its endpoints for every node, secret material, and
// resources for the nodes of cluster edge and for the node canary-1.
var configDumpDir = filepath.Join("testdata", "configdump", "config")

// TestConfigDumpGolden: /config_dump of the fixture configuration is the
// golden files' (-update rewrites them), for each of its views: every
// node's, secrets redacted (the default) and shown (AdminShowSecrets);
// ?node= for an id that only a node id selector matches, and for the node
// of a connected stream, which a cluster selector matches. The redacted
// files are also a regression test of the redaction.
//
// Nothing needs normalizing: the dump holds only the fixture's resources
// and the node id asked for (no time, none of the daemon's ports, no
// version or hash), laid out by encoding/json, which compacts protojson's
// deliberately unstable spacing, with keys and resources sorted.
func TestConfigDumpGolden(t *testing.T) {
	// check compares the dump at path, once it holds want, with the
	// golden file name; redacted views must not show the fixture's
	// secrets whatever the golden file says, so that -update cannot
	// write a leak into it unseen.
	check := func(t *testing.T, admin, path, name string, redacted bool, want ...string) {
		t.Helper()
		body := configDump(t, admin, path, want...)
		if redacted && (strings.Contains(body, "secret-private-key") || strings.Contains(body, "generic-secret-value")) {
			t.Errorf("GET %s shows secret material:\n%s", path, body)
		}
		golden.Check(t, filepath.Join("testdata", "configdump", name), body)
	}

	t.Run("redacted", func(t *testing.T) {
		addrs := startDaemon(t, Options{ConfigDir: configDumpDir})
		check(t, addrs.Admin, "/config_dump", "all.redacted.golden", true, "server-cert", "https")
		check(t, addrs.Admin, "/config_dump?node=canary-1", "node-canary-1.redacted.golden", true, "canary-only")
		// For an id without a stream, the node has that id alone: the
		// clusters: [edge] selector does not match it.
		check(t, addrs.Admin, "/config_dump?node=edge-1", "node-edge-1-no-stream.redacted.golden", true, "server-cert")

		// With a stream of a node of cluster edge, its node is the stream's.
		s := adsStreams(t, addrs.XDS)()
		if err := s.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "edge-1", Cluster: "edge"},
			TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		check(t, addrs.Admin, "/config_dump?node=edge-1", "node-edge-1-stream.redacted.golden", true, "edge-only")
	})

	t.Run("AdminShowSecrets", func(t *testing.T) {
		addrs := startDaemon(t, Options{ConfigDir: configDumpDir, AdminShowSecrets: true})
		check(t, addrs.Admin, "/config_dump", "all.secrets-shown.golden", false, "server-cert", "https")
	})
}
