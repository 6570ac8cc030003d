package tlsfiles

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestStampsSameSizeAndTime: a file rewritten in place with as many bytes
// and its modification time put back (cp -p of a renewed certificate of
// the same size) is a change: on Linux its change time moved. Before, the
// size, modification time and identity called it unchanged, and the old
// certificate kept serving.
func TestStampsSameSizeAndTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("change times are read on Linux")
	}
	path := filepath.Join(t.TempDir(), "cert.pem")
	pinned := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	stat := func(content string) stamps {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, pinned, pinned); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return stamps{fi}
	}
	before := stat("certificate one")
	if after := stat("certificate two"); before.equal(after) {
		t.Fatal("a same-size rewrite with its modification time put back compares equal")
	}
}
