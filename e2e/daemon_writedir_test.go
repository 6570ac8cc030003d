package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/fileout"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
)

// Files for Envoy's filesystem subscriptions (PROTOCOL T5).

// TestDaemon_T5_write_dir runs xdsd with --write-dir in YAML and in JSON:
// a file per type appears holding the configuration's resources, and an
// edit of the configuration rewrites only the files whose content changes.
func TestDaemon_T5_write_dir(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"yaml", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			enc, err := fileout.ParseEncoding(format)
			if err != nil {
				t.Fatal(err)
			}
			cfg := newConfigDir(t)
			cfg.writeService(dummyA)
			out := filepath.Join(t.TempDir(), "out") // created by xdsd
			d := startReady(t, nil, serveArgs(cfg.dir, "--write-dir", out, "--write-format", format, "--write-node", "files-node")...)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			const wroteMsg = `msg="wrote files for filesystem subscriptions"`
			path := func(ty *resource.Type) string { return filepath.Join(out, ty.Short+enc.Ext()) }

			d.waitLogLine(ctx, t, "the files written", wroteMsg)
			checkFiles(t, out, enc, cfg.byType())
			cdsBefore, err := os.Stat(path(resource.Lookup(cds)))
			if err != nil {
				t.Fatal(err)
			}

			cfg.write(endpointsFile, endpointsYAML(svcCluster, dummyB))
			eventually(ctx, t, "a second "+wroteMsg+" log line", func() (bool, string) {
				n := d.countLogLines(wroteMsg)
				return n >= 2, fmt.Sprintf("%d lines", n)
			})
			checkFiles(t, out, enc, cfg.byType())
			// Only the endpoints file was replaced.
			line := d.lastLogLine(wroteMsg)
			for _, ty := range fileout.Types() {
				named := strings.Contains(line, string(filepath.Separator)+ty.Short+enc.Ext())
				if named != (ty.URL == eds) {
					t.Errorf("log line %q: names %s: %v, want only eds", line, filepath.Base(path(ty)), named)
				}
			}
			cdsAfter, err := os.Stat(path(resource.Lookup(cds)))
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(cdsBefore, cdsAfter) || !cdsBefore.ModTime().Equal(cdsAfter.ModTime()) {
				t.Errorf("%s was replaced though its content did not change", cdsAfter.Name())
			}

			// The files are a configuration directory too: the same
			// resources, as another xdsd (or xdsctl validate) reads them.
			res, err := configdir.NewLoader(out).Load()
			if err != nil {
				t.Fatalf("the written files as a configuration directory: %v", err)
			}
			got := map[string][]*resource.Resource{}
			for _, r := range res.Resources {
				got[r.Type.URL] = append(got[r.Type.URL], r)
			}
			for url, rs := range cfg.byType() {
				if setVersion(got[url]...) != setVersion(rs...) {
					t.Errorf("%s read back from %s: %s, want %s", url, out, setVersion(got[url]...), setVersion(rs...))
				}
			}
		})
	}
}

// checkFiles checks that dir holds exactly one file per type of
// fileout.Types, no temporary file, and that each parses back into the
// resources of want for its type.
func checkFiles(t *testing.T, dir string, enc fileout.Encoding, want map[string][]*resource.Resource) {
	t.Helper()
	var wantNames, names []string
	for _, ty := range fileout.Types() {
		wantNames = append(wantNames, ty.Short+enc.Ext())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Errorf("%s holds %v, want %v", dir, names, wantNames)
	}
	for _, ty := range fileout.Types() {
		p := filepath.Join(dir, ty.Short+enc.Ext())
		resp, err := fileout.ReadResponse(p)
		if err != nil {
			t.Errorf("ReadResponse: %v", err)
			continue
		}
		if resp.TypeUrl != ty.URL {
			t.Errorf("%s: type_url %q, want %q", p, resp.TypeUrl, ty.URL)
		}
		sameResources(t, filepath.Base(p), resp.Resources, want[ty.URL])
		if v := setVersion(want[ty.URL]...); resp.VersionInfo != v {
			t.Errorf("%s: version_info %q, want %q", p, resp.VersionInfo, v)
		}
	}
}

// TestDaemon_T5_write_dir_retries: a write of the files that fails (the
// directory replaced by a plain file here) is tried again until it
// succeeds, without waiting for the configuration to change again; the
// directory is made again if it went. Before, the files stayed missing
// (or stale) until the next change of the configuration.
func TestDaemon_T5_write_dir_retries(t *testing.T) {
	t.Parallel()
	enc, err := fileout.ParseEncoding("yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := newConfigDir(t)
	cfg.writeService(dummyA)
	out := filepath.Join(t.TempDir(), "out")
	d := startReady(t, nil, serveArgs(cfg.dir, "--write-dir", out, "--write-node", "files-node")...)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	d.waitLogLine(ctx, t, "the files written", `msg="wrote files for filesystem subscriptions"`)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.write(endpointsFile, endpointsYAML(svcCluster, dummyB))
	d.waitLogLine(ctx, t, "the failed write", `msg="writing files for filesystem subscriptions; trying again"`)
	if err := os.Remove(out); err != nil { // the configuration stays as it is
		t.Fatal(err)
	}
	eventually(ctx, t, "the files written again", func() (bool, string) {
		entries, err := os.ReadDir(out)
		n := 0 // the files, not the temporary ones (".<name>.tmp-*") renamed into place
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				n++
			}
		}
		return err == nil && n == len(fileout.Types()), fmt.Sprintf("%d files, %v", n, err)
	})
	checkFiles(t, out, enc, cfg.byType())
}
