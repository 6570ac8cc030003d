package fileout_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/fileout"
	"github.com/xdsd/xdsd/internal/testutil/golden"
)

// TestT5_files_golden: the files --write-dir writes for the fixtures, in
// YAML and JSON, are testdata/write-dir/'s (-update rewrites them): what
// Envoy's filesystem subscriptions read changes only on purpose.
func TestT5_files_golden(t *testing.T) {
	snap := cache.MustSnapshot(fixtures()...)
	for _, enc := range []string{"yaml", "json"} {
		w, err := fileout.New(t.TempDir(), enc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(snap); err != nil {
			t.Fatal(err)
		}
		for _, typ := range fileout.Types() {
			b, err := os.ReadFile(w.Path(typ))
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "write-dir", filepath.Base(w.Path(typ))), string(b))
		}
	}
}
