package client_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/fileout"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/resource"
)

// newFileClient returns a client of the file at path, closed when the
// test ends.
func newFileClient(t *testing.T, path string, edit func(*client.Config)) *client.Client {
	t.Helper()
	return clienttest.New(t, client.Config{File: path, Backoff: clienttest.Backoff}, edit)
}

// replace writes data to path atomically, as a management server would.
func replace(t *testing.T, path string, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// clusterYAML is a hand-written CDS response with one cluster.
func clusterYAML(version, name string) string {
	return `version_info: "` + version + `"
type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: ` + name + `
  type: EDS
  eds_cluster_config:
    eds_config:
      ads: {}
`
}

func TestFile(t *testing.T) {
	eType := resource.Lookup(eds)
	for _, enc := range fileout.Encodings {
		t.Run("C7_reads_"+string(enc)+"_and_picks_up_replacements", func(t *testing.T) {
			w, err := fileout.New(t.TempDir(), string(enc))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(cache.MustSnapshot(rawxds.Cluster("a"), rawxds.Endpoints("a", 1))); err != nil {
				t.Fatal(err)
			}
			c := newFileClient(t, w.Path(eType), nil)
			r := clienttest.NewRecorder()
			defer c.Watch(eds, "a", r)()
			if u := r.WantUpdate(t, "a"); clienttest.Port(u) != 1 || u.Version == "" {
				t.Fatalf("update %+v, want port 1 with the file's version", u)
			}
			if _, err := w.Write(cache.MustSnapshot(rawxds.Cluster("a"), rawxds.Endpoints("a", 2))); err != nil {
				t.Fatal(err)
			}
			if u := r.WantUpdate(t, "a"); clienttest.Port(u) != 2 {
				t.Fatalf("port %d, want 2", clienttest.Port(u))
			}
		})
	}

	t.Run("C7_hand_written_yaml_with_full_state_deletion", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cds.yaml")
		replace(t, path, clusterYAML("1", "a"))
		c := newFileClient(t, path, nil)
		r := clienttest.NewRecorder()
		defer c.Watch(cds, "*", r)()
		if u := r.WantUpdate(t, "a"); u.Version != "1" {
			t.Fatalf("version %q, want 1", u.Version)
		}
		replace(t, path, clusterYAML("2", "b"))
		// C3: a full-state type's missing cluster is deleted.
		got := map[string]string{}
		for range 2 {
			e := r.Next(t)
			got[e.Name] = e.Kind
		}
		if got["a"] != "dne" || got["b"] != "update" {
			t.Fatalf("events %v, want a deleted and b updated", got)
		}
	})

	t.Run("C7_invalid_file_keeps_last_valid", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cds.yaml")
		replace(t, path, clusterYAML("1", "a"))
		c := newFileClient(t, path, nil)
		r := clienttest.NewRecorder()
		defer c.Watch(cds, "*", r)()
		r.WantUpdate(t, "a")
		replace(t, path, "version_info: [not a response")
		e := r.WaitFor(t, "error", func(e clienttest.Event) bool { return e.Kind == "error" })
		if !strings.Contains(e.Err.Error(), path) {
			t.Fatalf("error %v does not name the file", e.Err)
		}
		r.NoneYet(t)
		// A later watcher still gets the last valid content.
		r2 := clienttest.NewRecorder()
		defer c.Watch(cds, "a", r2)()
		r2.WantUpdate(t, "a")
		replace(t, path, clusterYAML("2", "a")+"  connect_timeout: 3s\n")
		if u := r.WantUpdate(t, "a"); u.Version != "2" {
			t.Fatalf("version %q, want 2", u.Version)
		}
	})

	t.Run("C7_C1_rejected_file_keeps_last_valid", func(t *testing.T) {
		w, err := fileout.New(t.TempDir(), "json")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(cache.MustSnapshot(rawxds.Endpoints("a", 1))); err != nil {
			t.Fatal(err)
		}
		c := newFileClient(t, w.Path(eType), func(c *client.Config) { c.Validate = clienttest.RejectPort(2) })
		r := clienttest.NewRecorder()
		defer c.Watch(eds, "a", r)()
		r.WantUpdate(t, "a")
		if _, err := w.Write(cache.MustSnapshot(rawxds.Endpoints("a", 2))); err != nil {
			t.Fatal(err)
		}
		e := r.WaitFor(t, "error", func(e clienttest.Event) bool { return e.Kind == "error" })
		if !strings.Contains(e.Err.Error(), "port 2 rejected") {
			t.Fatalf("error %v, want the validation error", e.Err)
		}
		r.NoneYet(t)
		if _, err := w.Write(cache.MustSnapshot(rawxds.Endpoints("a", 3))); err != nil {
			t.Fatal(err)
		}
		if u := r.WantUpdate(t, "a"); clienttest.Port(u) != 3 {
			t.Fatalf("port %d, want 3", clienttest.Port(u))
		}
	})

	t.Run("C7_missing_file_then_created", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cds.pb_text")
		c := newFileClient(t, path, nil)
		r := clienttest.NewRecorder()
		defer c.Watch(cds, "a", r)()
		r.WaitFor(t, "error", func(e clienttest.Event) bool {
			return e.Kind == "error" && strings.Contains(e.Err.Error(), "no such file")
		})
		text := `version_info: "7"
type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster"
resources: {
  [type.googleapis.com/envoy.config.cluster.v3.Cluster]: { name: "a" }
}
`
		replace(t, path, text)
		if u := r.WantUpdate(t, "a"); u.Version != "7" {
			t.Fatalf("version %q, want 7", u.Version)
		}
	})

	t.Run("C7_directory_removed_and_made_again", func(t *testing.T) {
		// As xdsd --write-dir does: the directory's watch ends with it.
		dir := filepath.Join(t.TempDir(), "out")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "cds.yaml")
		replace(t, path, clusterYAML("1", "a"))
		c := newFileClient(t, path, nil)
		r := clienttest.NewRecorder()
		defer c.Watch(cds, "*", r)()
		r.WantUpdate(t, "a")
		for i, name := range []string{"b", "c"} {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			r.WaitFor(t, "the missing file reported", func(e clienttest.Event) bool { return e.Kind == "error" })
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			replace(t, path, clusterYAML(fmt.Sprint(i+2), name))
			r.WaitFor(t, "update "+name, func(e clienttest.Event) bool { return e.Kind == "update" && e.Name == name })
		}
	})

	t.Run("C7_C4_name_not_in_file_does_not_exist", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cds.yaml")
		replace(t, path, clusterYAML("1", "a"))
		c := newFileClient(t, path, func(c *client.Config) { c.WatchExpiry = 50 * time.Millisecond })
		r := clienttest.NewRecorder()
		defer c.Watch(cds, "b", r)()
		r.WantDNE(t, "b")
	})

	t.Run("C7_config_errors", func(t *testing.T) {
		for _, cfg := range []client.Config{
			{File: "x.yaml", Delta: true},
			{File: "x.conf"},
		} {
			if c, err := client.New(cfg); err == nil {
				c.Close()
				t.Errorf("New(%+v) succeeded, want an error", cfg)
			}
		}
	})
}
