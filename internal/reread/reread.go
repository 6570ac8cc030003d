// Package reread keeps the parsed content of a file that an operator may
// change while xdsd runs (a token, a policy): the file is read again when
// its stamp changes (internal/filestamp), and a version that cannot be
// read or parsed keeps the last good content, reported once per version.
package reread

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/xdsd/xdsd/internal/filestamp"
)

// File is a file's parsed content. It is safe for concurrent use.
type File[T any] struct {
	path  string
	what  string // names the file in errors and logs: "authz policy", "token file"
	parse func([]byte) (T, error)
	log   *slog.Logger

	mu       sync.Mutex // guards the fields below
	value    T
	stamp    fs.FileInfo // of the version value or the last failure was read from
	loadedAt time.Time   // when value was read
	lastErr  error       // why the latest version was refused; nil if it was not
	errAt    time.Time
	ok, bad  uint64 // rereads (after Open) that took and that failed
}

// Status tells how a file's reads went.
type Status struct {
	// LoadedAt is when the content in force was read.
	LoadedAt time.Time
	// LastError is why the file's latest version was refused (the content
	// in force is then an earlier one's); empty if it was not.
	LastError string
	// LastErrorAt is when LastError was recorded.
	LastErrorAt time.Time
	// ReloadsOK and ReloadsFailed count the rereads since Open that took
	// and that were refused.
	ReloadsOK, ReloadsFailed uint64
}

// Open reads and parses the file at path; it fails if the file cannot be
// read or does not parse. what names the file in errors and logs; log
// receives the rereads and their failures (nil: slog.Default()).
func Open[T any](path, what string, parse func([]byte) (T, error), log *slog.Logger) (*File[T], error) {
	if log == nil {
		log = slog.Default()
	}
	f := &File[T]{path: path, what: what, parse: parse, log: log}
	st, v, err := f.read()
	if err != nil {
		return nil, err
	}
	f.stamp, f.value, f.loadedAt = st, v, time.Now()
	return f, nil
}

// Path is the file's path.
func (f *File[T]) Path() string { return f.path }

// Value returns the content in force, first reading the file again if it
// changed since it was last read.
func (f *File[T]) Value() T {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err == nil && filestamp.Same(st, f.stamp) {
		return f.value
	}
	if err == nil {
		var v T
		if st, v, err = f.read(); err == nil {
			f.value, f.stamp, f.loadedAt, f.lastErr = v, st, time.Now(), nil
			f.ok++
			f.log.Info(f.what+": read the changed file", "file", f.path)
			return f.value
		}
	} else {
		err = fmt.Errorf("%s: %w", f.what, err)
	}
	if f.lastErr == nil || !filestamp.Same(st, f.stamp) { // once per version of the file
		f.bad++
		f.lastErr, f.errAt = err, time.Now()
		f.log.Error(f.what+": the changed file is refused; the last good one stays", "file", f.path, "error", err)
	}
	f.stamp = st
	return f.value
}

// Status reads the file again if it changed, and tells how its reads
// went.
func (f *File[T]) Status() Status {
	f.Value()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Status{LoadedAt: f.loadedAt, ReloadsOK: f.ok, ReloadsFailed: f.bad}
	if f.lastErr != nil {
		s.LastError, s.LastErrorAt = f.lastErr.Error(), f.errAt
	}
	return s
}

// read stats the file, then reads and parses it. The stat comes first: a
// file being written as it is read shows up as changed again next time.
func (f *File[T]) read() (fs.FileInfo, T, error) {
	var zero T
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, zero, fmt.Errorf("%s: %w", f.what, err)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return st, zero, fmt.Errorf("%s: %w", f.what, err)
	}
	v, err := f.parse(b)
	if err != nil {
		return st, zero, err
	}
	return st, v, nil
}
