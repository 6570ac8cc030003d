// Package tokenfile reads a bearer token from a file, and reads it again
// when the file changes, without a restart: the token is the file's
// content with surrounding white space trimmed.
//
// A change is seen at the next Token call (see package reread). A change
// that leaves no token (the file gone, unreadable or empty, as it is for a
// moment when rewritten in place) is logged and the last token stays; the
// file is read again when it changes again.
package tokenfile

import (
	"bytes"
	"errors"
	"log/slog"

	"github.com/xdsd/xdsd/internal/reread"
)

// File is a token file. It is safe for concurrent use.
type File struct{ f *reread.File[string] }

// Open reads the token in the file at path; it fails if the file cannot
// be read or holds only white space. log receives the rereads and their
// failures; nil means slog.Default().
func Open(path string, log *slog.Logger) (*File, error) {
	f, err := reread.Open(path, "token file", func(b []byte) (string, error) {
		token := string(bytes.TrimSpace(b))
		if token == "" {
			return "", errors.New("token file " + path + ": empty")
		}
		return token, nil
	}, log)
	if err != nil {
		return nil, err
	}
	return &File{f}, nil
}

// Path is the file's path.
func (f *File) Path() string { return f.f.Path() }

// Token returns the token, first reading the file again if it changed
// since it was last read.
func (f *File) Token() string { return f.f.Value() }
