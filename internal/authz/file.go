package authz

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/filestamp"
)

// File is a policy file, read again when it changes. It is safe for
// concurrent use.
//
// A change is seen at the next Policy call (each Authorize, each Status),
// which compares the file's os.Stat (identity, size, modification and
// change times) with the one last read, so a file renamed over it, a
// Kubernetes Secret's link swap and a rewrite in place all count. A change
// that does not parse (or a file gone) is logged once per version of the
// file and recorded (Status); the last good policy stays.
type File struct {
	path string
	log  *slog.Logger

	mu       sync.Mutex // guards the fields below
	policy   *Policy
	stamp    fs.FileInfo // of the version policy or the last failure was read from
	loadedAt time.Time   // when policy was read
	lastErr  error       // why the latest version of the file was refused; nil if it was not
	errAt    time.Time
	ok, bad  uint64 // reloads (after Open) that took and that failed
}

// FileStatus tells how a policy file's reads went.
type FileStatus struct {
	// Path is the file's path.
	Path string
	// Rules is how many rules the policy in force has.
	Rules int
	// LoadedAt is when the policy in force was read.
	LoadedAt time.Time
	// LastError is why the file's latest version was refused (the policy
	// in force is then an earlier one); empty if it was not.
	LastError string
	// LastErrorAt is when LastError was recorded.
	LastErrorAt time.Time
	// ReloadsOK and ReloadsFailed count the reads since Open that took
	// and that were refused.
	ReloadsOK, ReloadsFailed uint64
}

// Open reads the policy in the file at path; it fails if the file cannot
// be read or does not parse. log receives the rereads and their failures;
// nil means slog.Default().
func Open(path string, log *slog.Logger) (*File, error) {
	if log == nil {
		log = slog.Default()
	}
	f := &File{path: path, log: log}
	st, p, err := f.read()
	if err != nil {
		return nil, err
	}
	f.stamp, f.policy, f.loadedAt = st, p, time.Now()
	return f, nil
}

// Policy returns the policy in force, first reading the file again if it
// changed since it was last read.
func (f *File) Policy() *Policy {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err == nil && filestamp.Same(st, f.stamp) {
		return f.policy
	}
	if err == nil {
		var p *Policy
		if st, p, err = f.read(); err == nil {
			f.policy, f.stamp, f.loadedAt, f.lastErr = p, st, time.Now(), nil
			f.ok++
			f.log.Info("authz: read the changed policy file", "file", f.path, "rules", p.Rules())
			return f.policy
		}
	} else {
		err = fmt.Errorf("authz policy: %w", err)
	}
	if f.lastErr == nil || !filestamp.Same(st, f.stamp) { // once per version of the file
		f.bad++
		f.lastErr, f.errAt = err, time.Now()
		f.log.Error("authz: the changed policy file is refused; the last good policy stays", "file", f.path, "error", err)
	}
	f.stamp = st
	return f.policy
}

// Status reads the file again if it changed, and tells how its reads
// went.
func (f *File) Status() FileStatus {
	p := f.Policy()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := FileStatus{Path: f.path, Rules: p.Rules(), LoadedAt: f.loadedAt, ReloadsOK: f.ok, ReloadsFailed: f.bad}
	if f.lastErr != nil {
		s.LastError, s.LastErrorAt = f.lastErr.Error(), f.errAt
	}
	return s
}

// Authorize decides, by the policy in force, whether the client of ctx
// (see PeerCertificate) may claim node; a refusal is a PermissionDenied
// status whose message says which identity claimed which node. It has the
// signature of server.Config.Authorize.
func (f *File) Authorize(ctx context.Context, node *corev3.Node) error {
	d := f.Policy().Decide(Identities(PeerCertificate(ctx)), node.GetId(), node.GetCluster())
	if !d.Allowed {
		return status.Error(codes.PermissionDenied, d.Reason)
	}
	return nil
}

// read stats the file, then reads and parses it. The stat comes first: a
// file being written as it is read shows up as changed again next time.
func (f *File) read() (fs.FileInfo, *Policy, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, nil, fmt.Errorf("authz policy: %w", err)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return st, nil, fmt.Errorf("authz policy: %w", err)
	}
	p, err := Parse(b)
	if err != nil {
		return st, nil, fmt.Errorf("%s: %w", f.path, err)
	}
	return st, p, nil
}
