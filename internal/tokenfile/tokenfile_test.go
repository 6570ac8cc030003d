package tokenfile

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replace writes content to a new file renamed over path.
func replace(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if _, err := Open(path, nil); err == nil {
		t.Error("Open of a missing file: no error")
	}
	replace(t, path, " \n\t ")
	if _, err := Open(path, nil); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("Open of a file of white space: %v, want it empty", err)
	}
	replace(t, path, "\n s3cret-token \n")
	f, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Token(); got != "s3cret-token" {
		t.Errorf("Token() = %q, want the file's content trimmed", got)
	}
	if f.Path() != path {
		t.Errorf("Path() = %q, want %q", f.Path(), path)
	}
}

// TestChanges checks that a change of the file is read at the next Token
// call, and that one that leaves no token keeps the last.
func TestChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	replace(t, path, "one\n")
	var logs bytes.Buffer
	f, err := Open(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := func(what, token string) {
		t.Helper()
		if got := f.Token(); got != token {
			t.Fatalf("%s: Token() = %q, want %q", what, got, token)
		}
	}
	want("opened", "one")
	replace(t, path, "two\n")
	want("renamed over", "two")
	if err := os.WriteFile(path, []byte("three-longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	want("rewritten in place", "three-longer")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	want("emptied", "three-longer")
	want("still empty", "three-longer")
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d errors logged for one empty version, want 1:\n%s", n, logs.String())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	want("removed", "three-longer")
	replace(t, path, "four")
	want("back", "four")
	if strings.Contains(logs.String(), "four") || strings.Contains(logs.String(), "three") {
		t.Errorf("a token is logged:\n%s", logs.String())
	}
}
