package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing/fstest"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/source/configdir"
)

// Config configures a Replica.
type Config struct {
	// Client is the etcd client (required); the caller closes it.
	Client *clientv3.Client
	// Prefix is the prefix of xdsd's keys; empty means DefaultPrefix.
	Prefix string
	// Logger receives the replica's logs; nil means slog.Default().
	Logger *slog.Logger
	// ProbeInterval is how often the replica checks that etcd answers;
	// zero means two seconds.
	ProbeInterval time.Duration
}

// Status is what a replica knows of the store.
type Status struct {
	// Prefix is the prefix of xdsd's keys.
	Prefix string
	// Revision is the latest etcd revision of the configuration read,
	// applied or rejected; zero before the first read.
	Revision int64
	// Generation is the generation in force at Revision.
	Generation string
	// Reachable says whether etcd answered the latest probe.
	Reachable bool
	// Since is when Reachable last changed (zero: never probed).
	Since time.Time
	// Error is why etcd was last found unreachable.
	Error string
}

// Replica reads the configuration from etcd and follows its changes (see
// Run). Status may be called from any goroutine.
type Replica struct {
	cfg Config
	l   layout
	log *slog.Logger

	mu     sync.Mutex // guards status
	status Status

	// Run's goroutine owns the fields below.
	gen    string          // the generation in force
	rev    int64           // the latest revision read
	readAt int64           // the revision files were last read whole at
	files  fstest.MapFS    // the generation's files, by path; the loader reads them
	bad    map[string]bool // keys that are no file's path (then nothing is loaded)
	loader *configdir.Loader
	loaded bool      // the loader has read the files since they were read whole (else Load reads them all)
	prep   *preparer // parses the generations being written; its workers are Run's
}

// NewReplica returns a replica for cfg; Run starts it.
func NewReplica(cfg Config) *Replica {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 2 * time.Second
	}
	return &Replica{cfg: cfg, l: layout{cfg.Prefix}, log: cfg.Logger, status: Status{Prefix: cfg.Prefix}}
}

// Status returns what the replica knows of the store.
func (r *Replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// errCompacted ends a watch whose next revision etcd compacted away: the
// replica reads the configuration whole again.
var errCompacted = errors.New("the watched revision was compacted")

// errWatchEnded ends a watch whose channel closed.
var errWatchEnded = errors.New("the watch ended")

// Run reads the configuration whole at a revision, hands it to apply if it
// loads or its problems to reject if not, then watches etcd and does the
// same for every later revision that changes it, several at once when
// they come in a burst, until ctx ends; it returns ctx's error. Each
// revision is read whole: never part of a transaction. When etcd fails,
// Run keeps what it had, reads again after a jittered backoff, and
// resumes its watch where it stopped; after a compaction it reads the
// configuration whole again (the cache's publication sends clients the
// difference only).
func (r *Replica) Run(ctx context.Context, apply func(res *configdir.Result, rev int64), reject func(error)) error {
	var wg sync.WaitGroup
	pctx, stop := context.WithCancel(ctx)
	defer wg.Wait()
	defer stop()
	wg.Go(func() { r.probe(pctx) })
	r.prep = newPreparer()
	wg.Go(func() { r.prep.run(pctx) })
	wait := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	synced := false
	for {
		var err error
		if !synced {
			if err = r.sync(ctx); err == nil {
				synced = true
				wait.reset()
				r.load(nil, true, apply, reject)
			}
		}
		if synced {
			err = r.watch(ctx, &wait, apply, reject)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Whatever failed, the configuration is read whole again: a
		// response that failed midway may have left changes read but not
		// loaded (the cache's publication sends clients the difference
		// only).
		synced = false
		if errors.Is(err, errCompacted) {
			r.log.Info("etcd compacted the revisions the watch was to read; reading the configuration whole again", "revision", r.rev)
			continue
		}
		if wait.cur == 0 { // once per run of failures: the probe says when etcd is back
			r.log.Warn("reading the configuration from etcd failed; serving the last one read, trying again", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait.next()):
		}
	}
}

// sync reads the generation in force whole.
func (r *Replica) sync(ctx context.Context) error {
	cur, err := r.cfg.Client.Get(ctx, r.l.current())
	if err != nil {
		return err
	}
	gen := firstGeneration
	if len(cur.Kvs) > 0 {
		gen = generationOf(cur.Kvs[0].Value)
	}
	return r.readGeneration(ctx, gen, cur.Header.Revision)
}

// readGeneration makes the files generation gen's at revision rev.
func (r *Replica) readGeneration(ctx context.Context, gen string, rev int64) error {
	resp, err := r.cfg.Client.Get(ctx, r.l.generation(gen), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			return errCompacted
		}
		return err
	}
	// One loader for every generation: a file whose bytes are those it
	// held in the generation before is not parsed again, so a switch to a
	// generation that changes a few of many files costs little more than
	// those files.
	if r.loader == nil {
		r.files = fstest.MapFS{}
		r.loader = configdir.NewFSLoader(r.files, "etcd keys under "+r.l.prefix+"config/")
	}
	clear(r.files)
	r.loaded = false
	r.bad = nil
	for _, kv := range resp.Kvs {
		if _, path, ok := r.l.file(string(kv.Key)); ok {
			r.put(path, kv)
		}
	}
	for path, p := range r.prep.take(gen) {
		r.loader.Offer(path, p)
	}
	r.gen, r.rev, r.readAt = gen, rev, rev
	return nil
}

// put records the file at path.
func (r *Replica) put(path string, kv *mvccpb.KeyValue) {
	if !fs.ValidPath(path) || path == "." {
		if r.bad == nil {
			r.bad = make(map[string]bool)
		}
		r.bad[path] = true
		return
	}
	delete(r.bad, path)
	// A file's modification time is its key's revision: the loader reads
	// again exactly the files whose keys changed.
	r.files[path] = &fstest.MapFile{Data: kv.Value, Mode: 0o444, ModTime: time.Unix(0, kv.ModRevision)}
}

// watch follows the changes after r.rev until ctx ends or the watch
// fails. A response resets the backoff.
func (r *Replica) watch(ctx context.Context, wait *backoff, apply func(res *configdir.Result, rev int64), reject func(error)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	start, end := r.l.watched()
	wch := r.cfg.Client.Watch(wctx, start, clientv3.WithRange(end), clientv3.WithRev(r.rev+1))
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case resp, ok := <-wch:
			changed, switched, err := r.drain(ctx, resp, ok, wch)
			if err != nil {
				return err
			}
			wait.reset()
			if switched || len(changed) > 0 {
				r.load(changed, switched, apply, reject)
			}
		}
	}
}

// drain applies resp and every watch response already waiting after it
// (a burst of revisions becomes one load). It returns the paths changed
// and whether the generation in force changed (the files were then read
// whole).
func (r *Replica) drain(ctx context.Context, resp clientv3.WatchResponse, ok bool, wch clientv3.WatchChan) (changed []string, switched bool, err error) {
	for {
		if !ok {
			return nil, false, errWatchEnded
		}
		if err := resp.Err(); err != nil {
			if resp.CompactRevision > 0 || errors.Is(err, rpctypes.ErrCompacted) {
				return nil, false, errCompacted
			}
			return nil, false, err
		}
		c, sw, err := r.events(ctx, resp.Events)
		if err != nil {
			return nil, false, err
		}
		if sw {
			switched, changed = true, nil
		}
		changed = append(changed, c...)
		select {
		case resp, ok = <-wch:
		default:
			return changed, switched, nil
		}
	}
}

// events applies a watch response's events, which cover whole revisions
// (etcd never splits one over responses). It returns the paths changed
// and whether the generation in force changed.
func (r *Replica) events(ctx context.Context, evs []*clientv3.Event) (changed []string, switched bool, err error) {
	for _, ev := range evs {
		rev := ev.Kv.ModRevision
		if rev <= r.readAt {
			continue // in what was read whole at readAt
		}
		key := string(ev.Kv.Key)
		if key == r.l.current() {
			gen := firstGeneration
			if ev.Type == clientv3.EventTypePut {
				gen = generationOf(ev.Kv.Value)
			}
			if gen != r.gen {
				if err := r.readGeneration(ctx, gen, rev); err != nil {
					return nil, false, err // r.rev stays before the switch
				}
				switched, changed = true, nil
			}
			r.rev = rev
			continue
		}
		r.rev = rev
		gen, path, ok := r.l.file(key)
		if !ok {
			continue
		}
		if gen != r.gen { // another generation's, being written (or deleted)
			if ev.Type == clientv3.EventTypePut && (r.files[path] == nil || !bytes.Equal(r.files[path].Data, ev.Kv.Value)) {
				r.prep.put(gen, path, ev.Kv.Value)
			} else {
				r.prep.remove(gen, path) // deleted, or the bytes in force, whose parse the loader keeps
			}
			continue
		}
		if ev.Type == clientv3.EventTypeDelete {
			delete(r.files, path)
			delete(r.bad, path)
		} else {
			r.put(path, ev.Kv)
		}
		changed = append(changed, path)
	}
	return changed, switched, nil
}

// load loads the files (the changed paths, or all of them if whole) and
// hands the result to apply or its problems to reject.
func (r *Replica) load(changed []string, whole bool, apply func(res *configdir.Result, rev int64), reject func(error)) {
	defer func() { // once the load is applied or rejected: xdsctl apply --wait reads it
		r.mu.Lock()
		r.status.Revision, r.status.Generation = r.rev, r.gen
		r.mu.Unlock()
	}()
	where := fmt.Sprintf("etcd revision %d, keys under %s", r.rev, r.l.generation(r.gen))
	if len(r.bad) > 0 {
		r.loaded = false // the changes left unread meanwhile: the next load reads every file
		for path := range r.bad {
			reject(fmt.Errorf("%s: key %s: not a file path", where, r.l.fileKey(r.gen, path)))
			return
		}
	}
	var res *configdir.Result
	var err error
	if whole || !r.loaded {
		res, err = r.loader.Load()
	} else {
		res, err = r.loader.Reload(changed)
	}
	r.loaded = true
	if err != nil {
		reject(fmt.Errorf("%s: %w", where, err))
		return
	}
	apply(res, r.rev)
}

// probe checks every ProbeInterval that etcd answers, until ctx ends.
func (r *Replica) probe(ctx context.Context) {
	t := time.NewTicker(r.cfg.ProbeInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.ProbeInterval)
		_, err := r.cfg.Client.Get(pctx, r.l.current(), clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.setReachable(err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setReachable records a probe's outcome, and logs a change of it.
func (r *Replica) setReachable(err error) {
	r.mu.Lock()
	was, probed := r.status.Reachable, !r.status.Since.IsZero()
	now := err == nil
	if now != was || !probed {
		r.status.Reachable, r.status.Since = now, time.Now()
	}
	if err != nil {
		r.status.Error = err.Error()
	}
	r.mu.Unlock()
	switch {
	case now && !was && probed:
		r.log.Info("etcd answers again")
	case !now && (was || !probed):
		r.log.Warn("etcd does not answer; serving the last configuration read", "error", err)
	}
}

// backoff is a jittered exponential backoff.
type backoff struct {
	min, max, cur time.Duration
}

// next returns the next wait: half the current step and a random part of
// the other half; the step doubles up to max.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	}
	d := b.cur/2 + rand.N(b.cur/2+1)
	b.cur = min(2*b.cur, b.max)
	return d
}

// reset starts the backoff again from min.
func (b *backoff) reset() { b.cur = 0 }
