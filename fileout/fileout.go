// Package fileout writes xdsd's resources as files for Envoy's filesystem
// subscriptions (ConfigSource.path_config_source, PROTOCOL T5).
//
// For one node's view of the configuration (the snapshot of its group), a
// Writer keeps one file per resource type in a directory, each holding a
// DiscoveryResponse with every resource of that type: lds.yaml, cds.yaml,
// eds.yaml, rds.yaml, srds.yaml, sds.yaml, rtds.yaml and ecds.yaml (the
// extension follows the Encoding). VHDS is incremental-only and has no
// file. A type without resources gets a response without resources, so
// that Envoy removes what it had.
//
// Each file is replaced atomically: the new content goes to a temporary
// file in the same directory, whose name starts with ".", which is then
// renamed into place, so a watcher never reads half a file. A file whose
// content would not change is not touched, so Envoy sees no spurious
// update, even after xdsd restarts (with the text encoding, whose output
// may differ between builds, a new binary may rewrite them once). There is
// no ACK or NACK on this path:
// Envoy keeps its last valid configuration when it rejects a file.
//
// Envoy's EDS, RDS, SDS, RTDS and ECDS subscriptions take exactly one
// resource per update and reject a file holding several (EDS, RDS and SDS
// ignore an empty one; RTDS and ECDS reject it too), so those files suit
// Envoy only while the type has exactly one resource. LDS, CDS and SRDS
// files may hold any number.
package fileout

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// Writer writes a snapshot's resources to a directory, one file per type.
// Its methods may be called from several goroutines; Writes are serialised.
type Writer struct {
	dir string
	enc Encoding
	mu  sync.Mutex
}

// New returns a Writer for dir in the named encoding (see ParseEncoding).
// It creates dir if needed and removes temporary files a previous Writer
// left behind when it was interrupted.
func New(dir, encoding string) (*Writer, error) {
	enc, err := ParseEncoding(encoding)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("fileout: no directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fileout: %w", err)
	}
	w := &Writer{dir: dir, enc: enc}
	for _, t := range Types() {
		stale, _ := filepath.Glob(filepath.Join(dir, tempPrefix(w.name(t))+"*"))
		for _, f := range stale {
			_ = os.Remove(f)
		}
	}
	return w, nil
}

// Dir returns the directory the Writer writes to.
func (w *Writer) Dir() string { return w.dir }

// Encoding returns the Writer's encoding.
func (w *Writer) Encoding() Encoding { return w.enc }

// Path returns the path of the file for type t, such as <dir>/cds.yaml.
func (w *Writer) Path(t *resource.Type) string { return filepath.Join(w.dir, w.name(t)) }

func (w *Writer) name(t *resource.Type) string { return t.Short + w.enc.Ext() }

// tempPrefix starts the name of a temporary file for the file name: hidden,
// so that tools that skip dot files skip it.
func tempPrefix(name string) string { return "." + name + ".tmp-" }

// Types returns the types that have a file, in ADS order: every type
// xdsd serves except VirtualHost (VHDS is incremental-only).
func Types() []*resource.Type {
	var out []*resource.Type
	for _, t := range resource.Types() {
		if t.URL != resource.VirtualHostType {
			out = append(out, t)
		}
	}
	return out
}

// Response returns the DiscoveryResponse a file holds for type t: every
// resource of t in snap, sorted by name, with version_info the set version
// of their hashes (Resource.Hash), the one xdsd's server sends, and no
// nonce. A nil snap is empty.
func Response(snap *cache.Snapshot, t *resource.Type) *discovery.DiscoveryResponse {
	resp := &discovery.DiscoveryResponse{TypeUrl: t.URL}
	var xor uint64
	for _, r := range snap.Resources(t) {
		resp.Resources = append(resp.Resources, r.Body)
		xor ^= r.Hash()
	}
	resp.VersionInfo = resource.SetVersion(xor)
	return resp
}

// Write brings every type's file in line with snap and returns the paths
// of the files it replaced, in ADS order; files whose content is unchanged
// are left alone. A nil snap writes empty responses. On error the other
// types are still written, and the error names each file that failed.
// A directory removed since New is made again.
func (w *Writer) Write(snap *cache.Snapshot) (written []string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return nil, fmt.Errorf("fileout: %w", err)
	}
	var errs []error
	for _, t := range Types() {
		data, e := w.enc.Marshal(Response(snap, t))
		if e != nil {
			errs = append(errs, fmt.Errorf("fileout: %s: %w", t.Short, e))
			continue
		}
		path := w.Path(t)
		changed, e := writeIfChanged(path, data)
		if e != nil {
			errs = append(errs, fmt.Errorf("fileout: %w", e))
			continue
		}
		if changed {
			written = append(written, path)
		}
	}
	return written, errors.Join(errs...)
}

// writeIfChanged replaces path with data, atomically, unless it already
// holds exactly data.
func writeIfChanged(path string, data []byte) (bool, error) {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	dir, name := filepath.Split(path)
	f, err := os.CreateTemp(dir, tempPrefix(name)+"*")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	fail := func(err error) (bool, error) {
		f.Close()
		os.Remove(tmp)
		return false, err
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	// Readable by an Envoy running as another user; not executable.
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	// On disk before the rename, so that a crash cannot leave a renamed
	// but empty file.
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return false, err
	}
	return true, nil
}

// ReadResponse reads a DiscoveryResponse file, choosing the encoding from
// the extension as Envoy does: .yaml or .yml, .json, .pb, and .pb_text or
// .txt for the text format. Any messages are resolved against every
// Envoy and xDS type.
func ReadResponse(path string) (*discovery.DiscoveryResponse, error) {
	enc, ok := EncodingOf(path)
	if !ok {
		return nil, fmt.Errorf("%s: unknown extension (want .yaml, .yml, .json, .pb, .pb_text or .txt)", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	resp, err := enc.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return resp, nil
}
