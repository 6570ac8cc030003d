package fileout_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/fileout"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait for something a test expects.
const testTimeout = 30 * time.Second

func fixtures() []*resource.Resource {
	return []*resource.Resource{
		rawxds.Cluster("backend"),
		rawxds.Endpoints("backend", 8080),
		rawxds.RDSListener("front", "routes"),
		rawxds.Route("routes", "backend"),
	}
}

// checkFiles reads every type's file back and compares it with snap.
func checkFiles(t *testing.T, w *fileout.Writer, snap *cache.Snapshot) {
	t.Helper()
	for _, typ := range fileout.Types() {
		path := w.Path(typ)
		resp, err := fileout.ReadResponse(path)
		if err != nil {
			t.Fatalf("ReadResponse(%s): %v", filepath.Base(path), err)
		}
		want := snap.Resources(typ)
		var xor uint64
		for _, r := range want {
			xor ^= r.Hash()
		}
		if resp.GetTypeUrl() != typ.URL {
			t.Errorf("%s: type_url = %q, want %q", typ, resp.GetTypeUrl(), typ.URL)
		}
		if v := resource.SetVersion(xor); resp.GetVersionInfo() != v {
			t.Errorf("%s: version_info = %q, want %q", typ, resp.GetVersionInfo(), v)
		}
		if len(resp.GetResources()) != len(want) {
			t.Fatalf("%s: %d resources, want %d", typ, len(resp.GetResources()), len(want))
		}
		for i, a := range resp.GetResources() {
			if a.GetTypeUrl() != want[i].Body.GetTypeUrl() {
				t.Errorf("%s #%d: type_url %q, want %q", typ, i, a.GetTypeUrl(), want[i].Body.GetTypeUrl())
				continue
			}
			got, exp := typ.New(), typ.New()
			if err := a.UnmarshalTo(got); err != nil {
				t.Fatalf("%s #%d: %v", typ, i, err)
			}
			if err := want[i].Body.UnmarshalTo(exp); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(exp, got, protocmp.Transform()); d != "" {
				t.Errorf("%s #%d: read back (-want +got):\n%s", typ, i, d)
			}
		}
	}
}

func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func paths(w *fileout.Writer, shorts ...string) []string {
	var out []string
	for _, s := range shorts {
		out = append(out, w.Path(resource.LookupShort(s)))
	}
	return out
}

func TestFiles(t *testing.T) {
	for _, enc := range []struct{ name, ext string }{
		{"yaml", ".yaml"}, {"json", ".json"}, {"binary", ".pb"}, {"text", ".pb_text"},
	} {
		t.Run("T5_"+enc.name+"_round_trip", func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out") // New creates it
			w, err := fileout.New(dir, enc.name)
			if err != nil {
				t.Fatal(err)
			}
			rs := fixtures()
			snap := cache.MustSnapshot(rs...)
			written, err := w.Write(snap)
			if err != nil {
				t.Fatal(err)
			}
			all := paths(w, "cds", "eds", "sds", "ecds", "lds", "rds", "srds", "rtds")
			if !slices.Equal(written, all) {
				t.Fatalf("first write wrote %v, want %v", written, all)
			}
			for _, p := range written {
				if filepath.Ext(p) != enc.ext {
					t.Errorf("%s: extension, want %s", p, enc.ext)
				}
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
					t.Errorf("%s: mode %v, %v; want 0644", p, fi.Mode(), err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "vhds"+enc.ext)); !os.IsNotExist(err) {
				t.Errorf("vhds file written: %v", err)
			}
			checkFiles(t, w, snap)

			// Unchanged: nothing is rewritten, not even with a new but
			// equal snapshot.
			before, _ := os.Stat(w.Path(resource.Lookup(resource.ClusterType)))
			written, err = w.Write(cache.MustSnapshot(fixtures()...))
			if err != nil || len(written) != 0 {
				t.Fatalf("unchanged write wrote %v, %v", written, err)
			}
			after, _ := os.Stat(w.Path(resource.Lookup(resource.ClusterType)))
			if !os.SameFile(before, after) || !before.ModTime().Equal(after.ModTime()) {
				t.Error("unchanged cds file was replaced")
			}

			// One endpoint set changes: only eds is rewritten.
			rs[1] = rawxds.Endpoints("backend", 9090)
			snap = cache.MustSnapshot(rs...)
			written, err = w.Write(snap)
			if err != nil || !slices.Equal(written, paths(w, "eds")) {
				t.Fatalf("eds change wrote %v, %v; want only eds", written, err)
			}
			checkFiles(t, w, snap)

			// The listener goes: lds becomes an empty response.
			snap = cache.MustSnapshot(rs[0], rs[1], rs[3])
			written, err = w.Write(snap)
			if err != nil || !slices.Equal(written, paths(w, "lds")) {
				t.Fatalf("listener removal wrote %v, %v; want only lds", written, err)
			}
			resp, err := fileout.ReadResponse(w.Path(resource.Lookup(resource.ListenerType)))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetResources()) != 0 || resp.GetVersionInfo() != resource.SetVersion(0) {
				t.Errorf("empty lds = %v", resp)
			}
			checkFiles(t, w, snap)

			// A nil snapshot empties every type that had resources.
			written, err = w.Write(nil)
			if err != nil || !slices.Equal(written, paths(w, "cds", "eds", "rds")) {
				t.Fatalf("nil snapshot wrote %v, %v", written, err)
			}
			checkFiles(t, w, nil)
			checkNoTemp(t, dir)
		})
	}
}

func TestT5_ParseEncoding(t *testing.T) {
	for in, want := range map[string]fileout.Encoding{
		"yaml": fileout.YAML, "YML": fileout.YAML, "json": fileout.JSON,
		"binary": fileout.Binary, "pb": fileout.Binary, "text": fileout.Text, "prototext": fileout.Text,
	} {
		if got, err := fileout.ParseEncoding(in); err != nil || got != want {
			t.Errorf("ParseEncoding(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "xml", "yaml2"} {
		if _, err := fileout.ParseEncoding(bad); err == nil {
			t.Errorf("ParseEncoding(%q) succeeded", bad)
		}
		if _, err := fileout.New(t.TempDir(), bad); err == nil {
			t.Errorf("New with encoding %q succeeded", bad)
		}
	}
	for path, want := range map[string]fileout.Encoding{
		"a/lds.yaml": fileout.YAML, "lds.yml": fileout.YAML, "cds.json": fileout.JSON,
		"x.pb": fileout.Binary, "x.pb_text": fileout.Text, "x.txt": fileout.Text,
	} {
		if got, ok := fileout.EncodingOf(path); !ok || got != want {
			t.Errorf("EncodingOf(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
	if _, err := fileout.ReadResponse(filepath.Join(t.TempDir(), "x.xml")); err == nil {
		t.Error("ReadResponse of .xml succeeded")
	}
}

// Strings that YAML 1.1 readers such as Envoy's yaml-cpp would take for a
// bool, null or number are quoted; "@type" keys are kept.
func TestT5_yaml_quoting(t *testing.T) {
	tricky := []string{"on", "yes", "No", "null", "1.5", "127.0.0.1", "*", "a: b", "-x", "~", "0x1F", "with space"}
	rc := resource.MustNew(&routev3.RouteConfiguration{
		Name: "yes",
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "on",
			Domains: tricky,
		}},
	})
	cla := resource.MustNew(&endpointv3.ClusterLoadAssignment{ClusterName: "off"})
	dir := t.TempDir()
	w, err := fileout.New(dir, "yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap := cache.MustSnapshot(rc, cla)
	if _, err := w.Write(snap); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, w, snap)
	data, err := os.ReadFile(filepath.Join(dir, "rds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{
		`"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration`,
		`name: "yes"`, `name: "on"`, `- "1.5"`, `- "127.0.0.1"`, `- "*"`, `- "~"`,
		"type_url: type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("rds.yaml lacks %s:\n%s", want, text)
		}
	}
	// Every string reads back as a string in a YAML 1.1 sense too: no
	// unquoted scalar is a reserved word.
	for _, line := range strings.Split(text, "\n") {
		v := strings.TrimSpace(line)
		if i := strings.Index(v, ": "); i >= 0 {
			v = v[i+2:]
		}
		v = strings.TrimPrefix(v, "- ")
		switch strings.ToLower(v) {
		case "on", "off", "yes", "no", "y", "n", "null", "~":
			t.Errorf("unquoted %q in line %q", v, line)
		}
	}
}

func TestT5_stale_temp_files_removed(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, ".lds.yaml.tmp-12345")
	other := filepath.Join(dir, ".keep")
	for _, p := range []string{stale, other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fileout.New(dir, "yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file kept: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("unrelated dot file removed: %v", err)
	}
}

// A restarted Writer does not rewrite files that already hold the content.
func TestT5_restart_writes_nothing(t *testing.T) {
	dir := t.TempDir()
	snap := cache.MustSnapshot(fixtures()...)
	for i := range 2 {
		w, err := fileout.New(dir, "json")
		if err != nil {
			t.Fatal(err)
		}
		written, err := w.Write(snap)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int]int{0: 8, 1: 0}[i]; len(written) != want {
			t.Errorf("writer #%d wrote %d files, want %d", i, len(written), want)
		}
	}
}

// Concurrent Writes are serialised and leave whole files.
func TestT5_concurrent_writes(t *testing.T) {
	dir := t.TempDir()
	w, err := fileout.New(dir, "binary")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for i := range 4 {
		go func() {
			var err error
			for j := range 10 {
				snap := cache.MustSnapshot(rawxds.Cluster("c"), rawxds.Endpoints("c", uint32(1000+10*i+j)))
				if _, e := w.Write(snap); e != nil && err == nil {
					err = e
				}
			}
			done <- err
		}()
	}
	deadline := time.After(testTimeout)
	for range 4 {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-deadline:
			t.Fatal("writes did not finish")
		}
	}
	resp, err := fileout.ReadResponse(filepath.Join(dir, "eds.pb"))
	if err != nil || len(resp.GetResources()) != 1 {
		t.Fatalf("eds.pb = %v, %v", resp, err)
	}
	checkNoTemp(t, dir)
}

// The example bootstrap parses as an Envoy v3 Bootstrap and reads the
// files this package writes.
func TestT5_bootstrap_example(t *testing.T) {
	data, err := os.ReadFile("../examples/envoy/bootstrap-files.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	dr := b.GetDynamicResources()
	for _, c := range []struct {
		name string
		cs   *corev3.ConfigSource
	}{{"lds.yaml", dr.GetLdsConfig()}, {"cds.yaml", dr.GetCdsConfig()}} {
		p := c.cs.GetPathConfigSource()
		if p.GetPath() != "/tmp/xdsd-out/"+c.name || p.GetWatchedDirectory().GetPath() != "/tmp/xdsd-out" {
			t.Errorf("%s: config source %v", c.name, c.cs)
		}
	}
	// The files are named as the Writer names them.
	w, err := fileout.New(t.TempDir(), "yaml")
	if err != nil {
		t.Fatal(err)
	}
	for short, name := range map[string]string{"lds": "lds.yaml", "cds": "cds.yaml"} {
		if got := filepath.Base(w.Path(resource.LookupShort(short))); got != name {
			t.Errorf("%s file %q, want %q", short, got, name)
		}
	}
}

// TestT5_yaml_aliases: a YAML response file may reuse a node through an
// anchor and alias; an alias to a node that contains it, or aliases that
// multiply a small file into millions of nodes, are errors, not a crash
// or the process's memory.
func TestT5_yaml_aliases(t *testing.T) {
	read := func(t *testing.T, doc string) (*discovery.DiscoveryResponse, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "cds.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return fileout.ReadResponse(path)
	}
	resp, err := read(t, `version_info: &v "7"
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: a
  connect_timeout: &timeout 5s
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: b
  connect_timeout: *timeout
nonce: *v
`)
	if err != nil {
		t.Fatalf("anchors and aliases: %v", err)
	}
	if resp.GetVersionInfo() != "7" || resp.GetNonce() != "7" || len(resp.GetResources()) != 2 {
		t.Errorf("anchors and aliases: got %v", resp)
	}

	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 'b'; i <= 'j'; i++ {
		laughs += fmt.Sprintf("%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	for name, tc := range map[string]struct{ doc, want string }{
		"an alias inside its own anchor": {"resources: &r [*r]\n", "alias *r refers to a node that contains it"},
		"an alias inside a map it names": {"version_info: x\nnonce: &n {a: *n}\n", "alias *n refers to a node that contains it"},
		"a billion laughs":               {laughs, "excessive aliasing"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := read(t, tc.doc); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadResponse = %v; want an error with %q", err, tc.want)
			}
		})
	}
}
