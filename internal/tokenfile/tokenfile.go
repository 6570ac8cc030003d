// Package tokenfile reads a bearer token from a file, and reads it again
// when the file changes, without a restart: the token is the file's
// content with surrounding white space trimmed.
//
// A change is seen at the next Token call, which compares the file's
// os.Stat (identity, size, modification and change times) with the one
// last read, so a file renamed over it, a Kubernetes Secret's link swap
// and a rewrite in place all count. A change that leaves no token (the
// file gone, unreadable or empty, as it is for a moment when rewritten in
// place) is logged and the last token stays; the file is read again when
// it changes again.
package tokenfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"github.com/xdsd/xdsd/internal/filestamp"
)

// File is a token file. It is safe for concurrent use.
type File struct {
	path string
	log  *slog.Logger

	mu     sync.Mutex // guards the fields below
	token  string
	stamp  fs.FileInfo // of the version the token or the last failure was read from
	failed bool        // the last read of the file failed
}

// Open reads the token in the file at path; it fails if the file cannot
// be read or holds only white space. log receives the rereads and their
// failures; nil means slog.Default().
func Open(path string, log *slog.Logger) (*File, error) {
	if log == nil {
		log = slog.Default()
	}
	f := &File{path: path, log: log}
	st, token, err := f.read()
	if err != nil {
		return nil, err
	}
	f.stamp, f.token = st, token
	return f, nil
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Token returns the token, first reading the file again if it changed
// since it was last read.
func (f *File) Token() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err == nil && filestamp.Same(st, f.stamp) {
		return f.token
	}
	if err == nil {
		var token string
		st, token, err = f.read()
		if err == nil {
			f.token, f.stamp, f.failed = token, st, false
			f.log.Info("tokenfile: read the changed token file", "file", f.path)
			return f.token
		}
	}
	if !f.failed || !filestamp.Same(st, f.stamp) { // once per version of the file
		f.log.Error("tokenfile: reading the changed token file failed; the last token stays", "error", err)
	}
	f.stamp, f.failed = st, true
	return f.token
}

// read stats the file, then reads its token. The stat comes first: a
// file being written as it is read shows up as changed again next time.
func (f *File) read() (fs.FileInfo, string, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, "", fmt.Errorf("token file: %w", err)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return st, "", fmt.Errorf("token file: %w", err)
	}
	token := string(bytes.TrimSpace(b))
	if token == "" {
		return st, "", errors.New("token file " + f.path + ": empty")
	}
	return st, token, nil
}
