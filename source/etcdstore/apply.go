package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing/fstest"

	"golang.org/x/sync/errgroup"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/source/configdir"
)

// Change is what Apply writes.
type Change struct {
	// Files are the files to write, by path relative to the
	// configuration's root, slash-separated.
	Files map[string][]byte
	// Delete lists paths to delete; one that ends in "/" deletes every
	// file under it. A path that names no file is an error.
	Delete []string
	// Prune deletes every file that Files does not hold: the
	// configuration is then Files exactly.
	Prune bool
	// IfRevision, if not zero, makes Apply fail with a *ConflictError if
	// the configuration changed after that revision.
	IfRevision int64
}

// Applied is what Apply did.
type Applied struct {
	// Revision is the etcd revision of the commit; when nothing changed,
	// that of the latest change of the configuration in force.
	Revision int64
	// Generation is the generation in force after the change.
	Generation string
	// Written and Deleted count the files written (new or changed) and
	// deleted.
	Written, Deleted int
	// NewGeneration says the change was too large for one transaction and
	// was written as a new generation.
	NewGeneration bool
}

// ConflictError is Apply's error when the configuration changed after
// Change.IfRevision.
type ConflictError struct {
	// IfRevision is the revision the change was made against.
	IfRevision int64
	// Revision is the revision of the latest change of the configuration.
	Revision int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflict: the configuration changed at revision %d, after revision %d", e.Revision, e.IfRevision)
}

// ChangeError is Apply's error for a change that cannot be made as given:
// a path that is not a configuration file's, or a deletion of a file the
// configuration does not hold.
type ChangeError struct {
	// Path is the path given.
	Path string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ChangeError) Error() string { return e.Path + ": " + e.Reason }

// MaxTxnOps and MaxTxnBytes bound what Apply writes in one transaction,
// below etcd's defaults (--max-txn-ops 128, --max-request-bytes 1.5 MiB)
// with room for the guards and the keys; a larger change is written as a
// new generation.
const (
	MaxTxnOps   = 120
	MaxTxnBytes = 1 << 20
)

// attempts bounds how often Apply starts again when another writer
// changed the configuration between its read and its commit.
const attempts = 5

// errRaced is a commit whose guards failed: another writer came first.
var errRaced = errors.New("the configuration changed during the apply")

// Apply changes the configuration under prefix (DefaultPrefix if empty) in
// one step. It reads the configuration in force, makes the change to it,
// and loads the result as xdsd's loader does: a result with problems is
// refused with the *configdir.Error that lists them (file, resource,
// field, reason), and nothing is written. Otherwise it commits the change
// in one transaction, or, for a change too large for one, as a new
// generation made current by one transaction (see the package's doc), so
// that every replica goes from the configuration before to the result
// whole. If another writer commits first, Apply starts again from its
// read, unless IfRevision is set: it then fails with a *ConflictError.
func Apply(ctx context.Context, cli *clientv3.Client, prefix string, ch Change) (Applied, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	l := layout{prefix}
	for path := range ch.Files {
		if !fs.ValidPath(path) || path == "." || !configdir.IsConfigFile(path) {
			return Applied{}, &ChangeError{Path: path, Reason: "not the path of a configuration file (*.yaml, *.yml or *.json, relative, without . or .. elements)"}
		}
	}
	for range attempts {
		a, err := apply(ctx, cli, l, ch)
		if !errors.Is(err, errRaced) {
			return a, err
		}
	}
	return Applied{}, fmt.Errorf("other writers changed the configuration %d times during the apply; try again", attempts)
}

// state is the configuration in force at a revision.
type state struct {
	rev     int64  // the revision read
	gen     string // the generation in force
	genRev  int64  // the modification revision of P+"current" (0: absent)
	files   map[string][]byte
	lastMod int64 // the latest modification revision of the configuration
}

// read reads the configuration in force.
func read(ctx context.Context, cli *clientv3.Client, l layout) (*state, error) {
	cur, err := cli.Get(ctx, l.current())
	if err != nil {
		return nil, err
	}
	s := &state{rev: cur.Header.Revision, gen: firstGeneration, files: make(map[string][]byte)}
	if len(cur.Kvs) > 0 {
		s.gen, s.genRev = generationOf(cur.Kvs[0].Value), cur.Kvs[0].ModRevision
	}
	s.lastMod = s.genRev
	resp, err := cli.Get(ctx, l.generation(s.gen), clientv3.WithPrefix(), clientv3.WithRev(s.rev))
	if err != nil {
		return nil, err
	}
	for _, kv := range resp.Kvs {
		if _, path, ok := l.file(string(kv.Key)); ok {
			s.files[path] = kv.Value
			s.lastMod = max(s.lastMod, kv.ModRevision)
		}
	}
	return s, nil
}

// apply is one attempt of Apply.
func apply(ctx context.Context, cli *clientv3.Client, l layout, ch Change) (Applied, error) {
	s, err := read(ctx, cli, l)
	if err != nil {
		return Applied{}, err
	}
	if ch.IfRevision > 0 && s.lastMod > ch.IfRevision {
		return Applied{}, &ConflictError{IfRevision: ch.IfRevision, Revision: s.lastMod}
	}
	result, err := s.with(ch)
	if err != nil {
		return Applied{}, err
	}
	if err := check(result); err != nil {
		return Applied{}, err
	}
	var puts []string
	for path, data := range result {
		if old, ok := s.files[path]; !ok || !bytes.Equal(old, data) {
			puts = append(puts, path)
		}
	}
	var dels []string
	for path := range s.files {
		if _, ok := result[path]; !ok {
			dels = append(dels, path)
		}
	}
	slices.Sort(puts)
	slices.Sort(dels)
	a := Applied{Revision: s.lastMod, Generation: s.gen, Written: len(puts), Deleted: len(dels)}
	if len(puts)+len(dels) == 0 {
		return a, nil // the configuration in force is the result: its revision is the one to wait for
	}
	size := 0
	for _, p := range puts {
		size += len(l.fileKey(s.gen, p)) + len(result[p])
	}
	guards := s.guards(l, ch.IfRevision)
	if len(puts)+len(dels)+1 <= MaxTxnOps && size <= MaxTxnBytes {
		ops := make([]clientv3.Op, 0, len(puts)+len(dels)+1)
		for _, p := range puts {
			ops = append(ops, clientv3.OpPut(l.fileKey(s.gen, p), string(result[p])))
		}
		for _, p := range dels {
			ops = append(ops, clientv3.OpDelete(l.fileKey(s.gen, p)))
		}
		ops = append(ops, clientv3.OpPut(l.current(), s.gen)) // every change moves it: IfRevision sees deletions
		rev, err := commit(ctx, cli, guards, ops, ch.IfRevision)
		a.Revision = rev
		return a, err
	}
	return s.switchTo(ctx, cli, l, result, guards, ch.IfRevision, a)
}

// with returns the configuration s holds with the change made.
func (s *state) with(ch Change) (map[string][]byte, error) {
	result := make(map[string][]byte, len(s.files)+len(ch.Files))
	if !ch.Prune {
		maps.Copy(result, s.files)
	}
	for _, p := range ch.Delete {
		dir := strings.HasSuffix(p, "/")
		n := 0
		for path := range result {
			if path == p || (dir && strings.HasPrefix(path, p)) {
				delete(result, path)
				n++
			}
		}
		if n == 0 && !ch.Prune {
			return nil, &ChangeError{Path: p, Reason: "no such file in the configuration"}
		}
	}
	maps.Copy(result, ch.Files)
	return result, nil
}

// check loads files as a replica would, and returns the problems found.
func check(files map[string][]byte) error {
	m := make(fstest.MapFS, len(files))
	for path, data := range files {
		m[path] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
	_, err := configdir.NewFSLoader(m, "the configuration with the change").Load()
	return err
}

// guards are the conditions of the commit: neither the generation in
// force nor any of its files changed since s was read (or since
// ifRevision, if set).
func (s *state) guards(l layout, ifRevision int64) []clientv3.Cmp {
	since := s.rev
	if ifRevision > 0 {
		since = ifRevision
	}
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(l.current()), "=", s.genRev),
		clientv3.Compare(clientv3.ModRevision(l.generation(s.gen)), "<", since+1).WithPrefix(),
	}
}

// commit runs one guarded transaction and returns its revision: errRaced
// (or a *ConflictError, with ifRevision) if a guard failed.
func commit(ctx context.Context, cli *clientv3.Client, guards []clientv3.Cmp, ops []clientv3.Op, ifRevision int64) (int64, error) {
	resp, err := cli.Txn(ctx).If(guards...).Then(ops...).Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		if ifRevision > 0 {
			return 0, &ConflictError{IfRevision: ifRevision, Revision: resp.Header.Revision}
		}
		return 0, errRaced
	}
	return resp.Header.Revision, nil
}

// stagingWrites is how many transactions of a generation's files a large
// apply has in flight at once.
const stagingWrites = 8

// stagingTTL is the lease of a generation's staging key: how long after
// its writer is gone the generation it was writing becomes garbage.
const stagingTTL = 60 // seconds

// switchTo writes result as a new generation, a transaction at a time,
// then makes it current in one guarded transaction and deletes the
// generation before. While it writes, the generation's staging key, under
// a lease kept alive meanwhile, marks it as being written; the switch
// requires the key, which goes with it. A failure deletes what it wrote of
// the new one. It first deletes the generations left by writers that died.
func (s *state) switchTo(ctx context.Context, cli *clientv3.Client, l layout, result map[string][]byte, guards []clientv3.Cmp, ifRevision int64, a Applied) (Applied, error) {
	collectGarbage(ctx, cli, l, s.gen)
	gen := strconv.FormatUint(rand.Uint64()>>1, 36)
	lease, err := cli.Grant(ctx, stagingTTL)
	if err != nil {
		return Applied{}, err
	}
	kctx, stopKeepAlive := context.WithCancel(ctx)
	alive, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		stopKeepAlive()
		return Applied{}, err
	}
	drained := make(chan struct{})
	go func() { // owned by switchTo, which waits for it
		defer close(drained)
		for range alive {
		}
	}()
	defer func() {
		stopKeepAlive()
		<-drained
		_, _ = cli.Revoke(context.WithoutCancel(ctx), lease.ID)
	}()
	abandon := func(err error) (Applied, error) {
		// Unless the switch went through after all (a commit whose
		// answer was lost): then the generation is the one in force.
		_, _ = cli.Txn(context.WithoutCancel(ctx)).
			If(clientv3.Compare(clientv3.Value(l.current()), "=", gen)).
			Else(clientv3.OpDelete(l.generation(gen), clientv3.WithPrefix()), clientv3.OpDelete(l.staging(gen))).Commit()
		return Applied{}, err
	}
	if _, err := cli.Put(ctx, l.staging(gen), "", clientv3.WithLease(lease.ID)); err != nil {
		return abandon(err)
	}
	// The generation's files go in transactions of at most MaxTxnOps and
	// MaxTxnBytes, stagingWrites of them in flight: etcd commits the
	// transactions that arrive together in one write of its log, where
	// one at a time would each wait for their own.
	writes, wctx := errgroup.WithContext(ctx)
	writes.SetLimit(stagingWrites)
	var ops []clientv3.Op
	size := 0
	flush := func() {
		if len(ops) == 0 {
			return
		}
		batch := ops
		ops, size = nil, 0
		writes.Go(func() error { // waits for a free slot
			_, err := cli.Txn(wctx).Then(batch...).Commit()
			return err
		})
	}
	for _, p := range slices.Sorted(maps.Keys(result)) {
		if wctx.Err() != nil {
			break // a write failed: Wait says why
		}
		key := l.fileKey(gen, p)
		n := len(key) + len(result[p])
		if n > MaxTxnBytes {
			_ = writes.Wait()
			return abandon(fmt.Errorf("%s: %d bytes, more than one etcd request takes (%d)", p, len(result[p]), MaxTxnBytes))
		}
		if len(ops) == MaxTxnOps || size+n > MaxTxnBytes {
			flush()
		}
		ops = append(ops, clientv3.OpPut(key, string(result[p])))
		size += n
	}
	flush()
	if err := writes.Wait(); err != nil {
		return abandon(err)
	}
	// Still marked as being written (not taken for garbage meanwhile).
	guards = append(guards, clientv3.Compare(clientv3.CreateRevision(l.staging(gen)), ">", 0))
	rev, err := commit(ctx, cli, guards, []clientv3.Op{clientv3.OpPut(l.current(), gen), clientv3.OpDelete(l.staging(gen))}, ifRevision)
	if err != nil {
		return abandon(err)
	}
	// The generation before is no longer read by anyone.
	_, _ = cli.Delete(ctx, l.generation(s.gen), clientv3.WithPrefix())
	a.Revision, a.Generation, a.NewGeneration = rev, gen, true
	return a, nil
}

// collectGarbage deletes the generations other than current that are not
// being written: left by a writer that died while writing, or after its
// switch, before it deleted the generation before. Each deletion is
// guarded, in case the generation became current or marked meanwhile.
// Failures are left for the next large change.
func collectGarbage(ctx context.Context, cli *clientv3.Client, l layout, current string) {
	resp, err := cli.Get(ctx, l.generations(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return
	}
	gens := make(map[string]bool)
	for _, kv := range resp.Kvs {
		if gen, _, ok := l.file(string(kv.Key)); ok && gen != current {
			gens[gen] = true
		}
	}
	for gen := range gens {
		_, _ = cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(l.staging(gen)), "=", 0),
			clientv3.Compare(clientv3.Value(l.current()), "!=", gen),
		).Then(clientv3.OpDelete(l.generation(gen), clientv3.WithPrefix())).Commit()
	}
}
