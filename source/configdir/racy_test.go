package configdir_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
)

// TestRacyStamp: a file rewritten in place with as many bytes within the
// step of the file system's clock keeps its stamp (size, modification
// time, inode; on Linux, change time too, which the step leaves as it
// was). One modified that close to its last read is read again
// when an event names it, by Reload and by a walk; one modified well
// before its last read is trusted by its stamp, and not read. The test
// sets the modification time back, which moves the change time: on Linux
// the stamp then tells the change, and the file is read in every case.
func TestRacyStamp(t *testing.T) {
	trusted, wantPort := 0, uint32(1001) // files read, and the port, where the stamp is trusted
	if runtime.GOOS == "linux" {
		trusted, wantPort = 1, 1002
	}
	port := func(t *testing.T, res *configdir.Result) uint32 {
		t.Helper()
		for _, r := range res.Resources {
			if r.Type == resource.Lookup(resource.EndpointType) {
				return r.Message.(*endpointv3.ClusterLoadAssignment).GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
			}
		}
		t.Fatal("no endpoints")
		return 0
	}
	// rewrite writes the file in place, as cp does, and sets its
	// modification time back to mtime, as a coarse clock would leave it.
	rewrite := func(t *testing.T, path string, p int, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(clusterYAML("x", p)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	for name, load := range map[string]func(*configdir.Loader) (*configdir.Result, error){
		"Reload":  func(l *configdir.Loader) (*configdir.Result, error) { return l.Reload([]string{"a.yaml"}) },
		"Load":    func(l *configdir.Loader) (*configdir.Result, error) { return configdir.LoadNamed(l, "a.yaml") },
		"unnamed": nil,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.yaml")
			mtime := time.Now()
			rewrite(t, path, 1001, mtime)
			l := configdir.NewLoader(dir)
			res, err := l.Load()
			if err != nil || port(t, res) != 1001 {
				t.Fatalf("first load: %v", err)
			}
			rewrite(t, path, 1002, mtime) // same size, same inode, same time
			if load == nil {              // a walk no event asked for trusts the stamp
				if res, err = l.Load(); err != nil || res.Reread != trusted || port(t, res) != wantPort {
					t.Fatalf("a walk: %v, %d files read", err, res.Reread)
				}
				return
			}
			if res, err = load(l); err != nil {
				t.Fatal(err)
			}
			if got := port(t, res); got != 1002 {
				t.Errorf("after the rewrite, port %d; want 1002", got)
			}
		})
	}
	t.Run("old_stamp", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a.yaml")
		old := time.Now().Add(-time.Hour)
		rewrite(t, path, 1001, old)
		l := configdir.NewLoader(dir)
		if _, err := l.Load(); err != nil {
			t.Fatal(err)
		}
		rewrite(t, path, 1002, old) // as no clock could: an hour back
		res, err := l.Reload([]string{"a.yaml"})
		if err != nil || res.Reread != trusted || port(t, res) != wantPort {
			t.Fatalf("a stamp older than the read is trusted: %v, %d files read", err, res.Reread)
		}
	})
}
