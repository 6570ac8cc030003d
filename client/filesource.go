package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/fsnotify/fsnotify"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/fileout"
)

// A file subscription (C7, PROTOCOL T5) is a transport whose one stream
// reads a file holding a DiscoveryResponse: the client core decodes,
// validates and applies its content like any SotW response, and the
// requests it sends, ACKs and NACKs alike, go nowhere. A file that cannot
// be read or decoded is reported to the stream as an unusableError, which
// does not end the stream: the watchers hear of it and the last valid
// resources stay in force.

// encodingOf returns the encoding of a file subscription's path.
func encodingOf(path string) (fileout.Encoding, bool) { return fileout.EncodingOf(path) }

// unusableError is a Recv error that rejects one input but does not end
// the stream.
type unusableError struct{ err error }

func (e *unusableError) Error() string { return e.err.Error() }
func (e *unusableError) Unwrap() error { return e.err }

// isUnusable says whether err rejects one input without ending the stream.
func isUnusable(err error) bool {
	var u *unusableError
	return errors.As(err, &u)
}

// reportUnusable tells every watcher of the stream that an input was
// rejected; the last valid resources stay in force.
func (s *stream) reportUnusable(err error) {
	for _, ts := range s.types {
		for _, w := range ts.allWatchers() {
			w.error(err)
		}
	}
}

// dirPollInterval is how often a file subscription looks for its
// directory again after the directory was removed or renamed.
const dirPollInterval = 50 * time.Millisecond

// fileBuilder builds the transport of a file subscription; the server is
// the file's path.
type fileBuilder struct{}

var (
	_ TransportBuilder = fileBuilder{}
	_ Transport        = (*fileTransport)(nil)
	_ Stream           = (*fileStream)(nil)
)

func (fileBuilder) Build(path string) (Transport, error) {
	enc, ok := encodingOf(path)
	if !ok {
		return nil, fmt.Errorf("client: file %s: unknown extension", path)
	}
	return &fileTransport{path: path, enc: enc}, nil
}

// fileTransport opens streams on one file.
type fileTransport struct {
	path    string           // read-only
	enc     fileout.Encoding // read-only
	streams sync.WaitGroup   // the streams' goroutines (run)
}

// NewStream watches the file's directory and starts reading the file.
func (t *fileTransport) NewStream(ctx context.Context, method string) (Stream, error) {
	if strings.Contains(method, "/Delta") {
		return nil, fmt.Errorf("client: file %s: no incremental variant of a file subscription", t.path)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("client: file %s: %w", t.path, err)
	}
	// The directory, not the file: a replacement renamed into place is a
	// new file, which a watch on the old one would never see.
	if err := w.Add(filepath.Dir(t.path)); err != nil {
		w.Close()
		return nil, fmt.Errorf("client: file %s: watch directory: %w", t.path, err)
	}
	s := &fileStream{
		ctx:   ctx,
		path:  t.path,
		enc:   t.enc,
		fw:    w,
		kick:  make(chan struct{}, 1),
		out:   make(chan recvResult),
		names: make(map[string][]string),
	}
	t.streams.Go(s.run)
	return s, nil
}

// Close waits for the streams' goroutines, which end with their contexts
// and close their own watchers.
func (t *fileTransport) Close() error {
	t.streams.Wait()
	return nil
}

// fileStream is one file subscription stream. Its goroutine, run, owns
// the watcher and the file's content; Send tells it of new subscriptions
// under mu.
type fileStream struct {
	// Read-only after NewStream.
	ctx  context.Context
	path string
	enc  fileout.Encoding
	fw   *fsnotify.Watcher
	kick chan struct{}   // capacity 1: a subscription changed
	out  chan recvResult // unbuffered; run sends, Recv receives

	mu    sync.Mutex          // guards names
	names map[string][]string // by type URL: the names last requested
}

// Send takes note of the names a request subscribes to. A new type or
// changed names make the stream deliver the file's content again, since
// the client keeps only the resources it watched when it last read it.
// ACKs and NACKs go nowhere (PROTOCOL T5).
func (s *fileStream) Send(msg []byte) error {
	req := new(discovery.DiscoveryRequest)
	if err := proto.Unmarshal(msg, req); err != nil {
		return fmt.Errorf("client: file %s: decode request: %w", s.path, err)
	}
	s.mu.Lock()
	old, ok := s.names[req.GetTypeUrl()]
	changed := !ok || !slices.Equal(old, req.GetResourceNames())
	s.names[req.GetTypeUrl()] = req.GetResourceNames()
	s.mu.Unlock()
	if changed {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// subscribed says whether a request has been sent.
func (s *fileStream) subscribed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.names) > 0
}

// Recv returns the file's next content, an unusableError for a file that
// cannot be used, or the stream's end.
func (s *fileStream) Recv() ([]byte, error) {
	select {
	case r := <-s.out:
		return r.msg, r.err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// run reads the file at the start and whenever it changes, until the
// stream's context ends.
func (s *fileStream) run() {
	defer s.fw.Close()
	var (
		queue   []recvResult
		data    []byte // the content of good
		good    *discovery.DiscoveryResponse
		lastErr string
		nonce   int
	)
	deliver := func() {
		if good == nil {
			return
		}
		nonce++
		resp := proto.Clone(good).(*discovery.DiscoveryResponse)
		resp.Nonce = "file-" + strconv.Itoa(nonce)
		b, err := proto.Marshal(resp)
		if err != nil {
			queue = append(queue, recvResult{err: &unusableError{fmt.Errorf("client: file %s: %w", s.path, err)}})
			return
		}
		queue = append(queue, recvResult{msg: b})
	}
	load := func() {
		b, err := os.ReadFile(s.path)
		if err == nil && good != nil && bytes.Equal(b, data) {
			return // unchanged
		}
		var resp *discovery.DiscoveryResponse
		if err == nil {
			resp, err = s.enc.Unmarshal(b)
		}
		if err != nil {
			err = fmt.Errorf("client: file %s: %w (the last valid content stays in force)", s.path, err)
			if err.Error() != lastErr {
				lastErr = err.Error()
				data = nil // a later valid file is new, even if the same as good
				queue = append(queue, recvResult{err: &unusableError{err}})
			}
			return
		}
		if resp.GetTypeUrl() == "" {
			resp.TypeUrl = contentType(resp)
		}
		lastErr, data, good = "", b, resp
		if s.subscribed() {
			deliver()
		} // else the first request's kick delivers it
	}
	load()
	dir, base := filepath.Dir(s.path), filepath.Base(s.path)
	var rewatch *time.Timer // running while the directory is gone
	defer func() {
		if rewatch != nil {
			rewatch.Stop()
		}
	}()
	for {
		var out chan recvResult
		var next recvResult
		if len(queue) > 0 {
			out, next = s.out, queue[0]
		}
		var retry <-chan time.Time
		if rewatch != nil {
			retry = rewatch.C
		}
		select {
		case <-s.ctx.Done():
			return
		case out <- next:
			queue = queue[1:]
		case <-s.kick:
			deliver()
		case <-retry:
			// The directory was removed or renamed, which ends its
			// watch: watch it again once it exists, and read the file.
			if s.fw.Add(dir) != nil {
				rewatch.Reset(dirPollInterval)
				break
			}
			rewatch = nil
			load()
		case ev, ok := <-s.fw.Events:
			if !ok {
				return
			}
			if filepath.Clean(ev.Name) == dir && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				_ = s.fw.Remove(dir) // a renamed directory is still watched where it went
				if rewatch == nil {
					rewatch = time.NewTimer(dirPollInterval)
				}
				break
			}
			if filepath.Base(ev.Name) == base || isSymlink(s.path) {
				load()
			}
		case err, ok := <-s.fw.Errors:
			if !ok {
				return
			}
			queue = append(queue, recvResult{err: &unusableError{fmt.Errorf("client: file %s: watch: %w", s.path, err)}})
		}
	}
}

// contentType returns the type of a response's resources, for a file that
// leaves out the response's type_url.
func contentType(resp *discovery.DiscoveryResponse) string {
	for _, a := range resp.GetResources() {
		if a.GetTypeUrl() != wrapperType {
			return a.GetTypeUrl()
		}
		var w discovery.Resource
		if a.UnmarshalTo(&w) == nil && w.GetResource() != nil {
			return w.GetResource().GetTypeUrl()
		}
	}
	return ""
}

// isSymlink says whether path is a symbolic link, whose target may change
// with no event naming the file (as a Kubernetes ConfigMap volume does).
func isSymlink(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}
