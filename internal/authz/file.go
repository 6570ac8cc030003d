package authz

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/reread"
)

// File is a policy file, read again when it changes. It is safe for
// concurrent use.
//
// A change is seen at the next Policy call (each Authorize, each Status;
// see package reread). A change that does not parse (or a file gone) is
// logged once per version of the file and recorded (Status); the last
// good policy stays.
type File struct{ f *reread.File[*Policy] }

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
	f, err := reread.Open(path, "authz policy", func(b []byte) (*Policy, error) {
		p, err := Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return p, nil
	}, log)
	if err != nil {
		return nil, err
	}
	return &File{f}, nil
}

// Policy returns the policy in force, first reading the file again if it
// changed since it was last read.
func (f *File) Policy() *Policy { return f.f.Value() }

// Status reads the file again if it changed, and tells how its reads
// went.
func (f *File) Status() FileStatus {
	st := f.f.Status()
	return FileStatus{Path: f.f.Path(), Rules: f.Policy().Rules(), LoadedAt: st.LoadedAt, LastError: st.LastError,
		LastErrorAt: st.LastErrorAt, ReloadsOK: st.ReloadsOK, ReloadsFailed: st.ReloadsFailed}
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
