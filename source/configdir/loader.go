package configdir

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdsd/xdsd/internal/filestamp"
	"github.com/xdsd/xdsd/resource"
)

// Loader loads a configuration directory and reloads it, re-reading only
// the files that changed since the last load. It is not safe for
// concurrent use: one goroutine (the watcher) owns it.
type Loader struct {
	fsys  fs.FS
	name  string                // shown in errors
	files map[string]*fileState // by path relative to the root
	paths []string              // the keys of files, sorted; nil when to be made again
	// last is the latest assembly, if it succeeded and the files still
	// hold what it was made of: a reload that changes resources' contents
	// only starts from it.
	last *assembly
	// held names the files that writers still have open, as Watch sets
	// it around a load: Load keeps what they held when last read.
	held map[string]bool
	// named names the files that events named since the last load, as
	// Watch sets it around a load: Load reads them again if their stamps
	// are racy, as Reload does the paths it is given.
	named map[string]bool
	// watched is set by Watch, whose file watcher reports every change:
	// a file that changed while it was read (its stamp after the read is
	// not the one before) then keeps what it held, for the change's own
	// event to have it read again, rather than be taken half-written.
	watched bool
	// writerOpen, set by Watch, reports whether a writer has the file rel
	// open, and when it last wrote; walk says whether Load asks. A file
	// found writing is kept as it was and listed in writers, for Watch to
	// read it once it is closed: written in place when xdsd started, or in
	// a directory made a moment before it was watched. A file found
	// unsure is kept as it was and listed in unsure, for Watch to look at
	// again shortly.
	writerOpen func(rel string, walk bool) (time.Time, writerState)
	writers    []writer
	unsure     []string
	// rescan asks Watch to walk the directory (see Rescan).
	rescan chan struct{}
	// offered holds the files parsed ahead of the next load, by path (see
	// Offer); readAll only reads it.
	offered map[string]*Prepared
}

// writerState is what writerOpen found of a file's writers.
type writerState int

const (
	noWriter writerState = iota // none to wait for: read it
	// writing: a writer has the file open and wrote it lately; read it
	// once its writer closes it.
	writing
	// unsure: events named the file, yet it is open for writing (see
	// watch.writerOpen); look again shortly.
	unsure
)

// writer is a file a walk found open for writing, and when it was last
// written.
type writer struct {
	rel string
	at  time.Time
}

// assembly is a configuration that assembled without problems, with what a
// reload needs to update it in place.
type assembly struct {
	res  *Result
	at   map[key]int // index in res.Resources of each resource every node sees
	refs nameSets
}

// removeFile forgets the file rel.
func (l *Loader) removeFile(rel string) {
	if _, ok := l.files[rel]; ok {
		delete(l.files, rel)
		l.paths, l.last = nil, nil
	}
}

// sortedPaths returns the paths of the files, sorted.
func (l *Loader) sortedPaths() []string {
	if l.paths == nil {
		l.paths = make([]string, 0, len(l.files))
		for p := range l.files {
			l.paths = append(l.paths, p)
		}
		slices.Sort(l.paths)
	}
	return l.paths
}

// holdsUnder reports whether the loader holds a file under the directory
// dir (relative to the root, slash-separated).
func (l *Loader) holdsUnder(dir string) bool {
	prefix := dir + "/"
	paths := l.sortedPaths()
	i, _ := slices.BinarySearch(paths, prefix)
	return i < len(paths) && strings.HasPrefix(paths[i], prefix)
}

// fileState is what a file held when last read.
type fileState struct {
	stamp stamp
	parsed
	// racy: the file was modified so shortly before it was read that a
	// change after the read may have left its stamp as it was (see
	// racyWindow). A change named by an event reads it again.
	racy bool
}

// racyWindow is how close to its read a file's modification time makes
// its stamp racy: a file system's timestamps step by a kernel tick (1 to
// 10 ms on Linux without fine-grained timestamps) or more (2 s on FAT), so
// a file rewritten in place with as many bytes within the step of the
// read keeps its stamp. Git calls such index entries racily clean.
const racyWindow = 2 * time.Second

// stamp tells whether a file may have changed without reading it.
type stamp struct {
	size  int64
	mtime time.Time
	ctime time.Time // zero where not read (see filestamp.ChangeTime)
	ino   uint64
}

// Result is a loaded configuration.
type Result struct {
	// Resources holds every resource without a node selector (every node
	// sees them), sorted by type and name.
	Resources []*resource.Resource
	// Scoped holds the documents with a node selector, in file order.
	Scoped []Scoped
	// Files is the number of configuration files read.
	Files int
	// Reread is the number of files read by this load (the others had not
	// changed).
	Reread int
	// Prepared is the number of the files read whose bytes had been parsed
	// ahead (see Loader.Offer), and so were not parsed by this load.
	Prepared int
	// Took is how long the load took: finding, reading and parsing the
	// files, and assembling the configuration.
	Took time.Duration
	// Waited is, for a load by Watch, how long it waited to begin: from
	// the first file event of the change until the load started, most of
	// it the quiet that ends a burst of events (Debounce, Settle). A load
	// put off for a file its writer held open (WriteWait) counts from the
	// load that put it off. Zero for Watch's first load and for loads
	// not by Watch.
	Waited time.Duration
}

// NewLoader returns a loader for the directory dir. Nothing is read until
// Load.
func NewLoader(dir string) *Loader { return NewFSLoader(os.DirFS(dir), dir) }

// errNoDir is the error of a load that finds no directory.
var errNoDir = errors.New("no such directory")

// errVanished marks a load that found a directory gone between its listing
// and its reading, as when a tree is swapped for another. The load fails
// rather than drop the directory's files, which may be back a moment
// later under the same names: Watch holds the error and walks again.
var errVanished = errors.New("directory removed while it was read")

// NewFSLoader returns a loader for a file system (an embedded
// configuration, say); name is how errors refer to it. The loader reads
// several files of fsys at once.
func NewFSLoader(fsys fs.FS, name string) *Loader {
	return &Loader{fsys: fsys, name: name, files: make(map[string]*fileState), rescan: make(chan struct{}, 1)}
}

// Rescan asks Watch, if it runs with l, to walk the directory soon and
// read every file whose size, times or inode changed, as it does after the
// file watcher lost events: for changes no event tells of, such as a file
// linked from outside the directory rewritten where it is. It may be
// called from any goroutine, and does not wait.
func (l *Loader) Rescan() {
	select {
	case l.rescan <- struct{}{}:
	default: // one is asked for already
	}
}

// IsConfigFile reports whether a path (relative to the directory) is a
// configuration file: *.yaml, *.yml or *.json, with no path element that
// starts with "." (editors' and writers' temporary files).
func IsConfigFile(rel string) bool {
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	switch filepath.Ext(rel) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// passOver reports whether a walk passes over the entry d at rel: a
// directory (whose tree it skips, err, if its name starts with "."), or a
// file that is not a configuration file.
func passOver(rel string, d fs.DirEntry) (skip bool, err error) {
	if d.IsDir() {
		if rel != "." && strings.HasPrefix(d.Name(), ".") {
			return true, filepath.SkipDir
		}
		return true, nil
	}
	return !IsConfigFile(rel), nil
}

// ConfigFiles returns the paths of the configuration files in fsys, as
// Load finds them.
func ConfigFiles(fsys fs.FS) ([]string, error) {
	var paths []string
	err := fs.WalkDir(fsys, ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip, err := passOver(rel, d); skip {
			return err
		}
		paths = append(paths, rel)
		return nil
	})
	return paths, err
}

// Load reads the directory and returns the whole configuration, or an
// *Error listing every problem. Files whose size, modification time,
// change time (on Linux) and inode are unchanged since the last Load are
// not read again.
func (l *Loader) Load() (*Result, error) {
	start := time.Now()
	defer l.dropOffers()
	l.last = nil // files change below: only a successful assemble sets it again
	seen := make(map[string]bool)
	var stale []*reading
	err := fs.WalkDir(l.fsys, ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil && rel == "." && errors.Is(err, fs.ErrNotExist) {
			return errNoDir
		}
		if err != nil && d != nil && d.IsDir() && errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %w", errVanished, err)
		}
		if err != nil {
			return err
		}
		if skip, err := passOver(rel, d); skip {
			return err
		}
		if l.held[rel] {
			seen[rel] = true // kept as last read, if it was
			return nil
		}
		info, err := fileInfo(l.fsys, rel, d)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		seen[rel] = true
		if r := l.stale(rel, info, l.named[rel]); r != nil {
			r.walk = true
			stale = append(stale, r)
		}
		return nil
	})
	l.writers, l.unsure = l.writers[:0], l.unsure[:0]
	reread, prepared := 0, 0
	if err == nil {
		reread, prepared, err = l.storeAll(stale)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", l.name, err)
	}
	for rel := range l.files { // a file gone since it was listed is gone from files too
		if !seen[rel] {
			l.removeFile(rel)
		}
	}
	res, err := l.assemble()
	if res != nil {
		res.Reread, res.Prepared, res.Took = reread, prepared, time.Since(start)
	}
	return res, err
}

// fileInfo is the information of the file d found at rel, through a
// symbolic link: a link's target is what is read, and what a Kubernetes
// ConfigMap volume changes (it swaps the links' directory).
func fileInfo(fsys fs.FS, rel string, d fs.DirEntry) (fs.FileInfo, error) {
	if d.Type()&fs.ModeSymlink != 0 {
		return fs.Stat(fsys, rel)
	}
	return d.Info()
}

// storeAll reads the files rs (readAll) and stores what it found in their
// order, up to the first error. It returns how many files it read (not
// gone), and how many of those it found parsed ahead.
func (l *Loader) storeAll(rs []*reading) (read, prepared int, err error) {
	l.readAll(rs)
	for _, r := range rs {
		if err := l.store(r); err != nil {
			return read, prepared, err
		}
		if !r.gone && !r.moved && r.writer == noWriter {
			read++
			if r.prepared {
				prepared++
			}
		}
	}
	return read, prepared, nil
}

// Reload is Load for a set of paths (relative to the directory) known to
// be the only ones that may have changed, as a file watcher reports them:
// it looks at those alone, without walking the directory. Paths that are
// not configuration files are ignored; a path that is now a directory
// makes it fall back to Load.
func (l *Loader) Reload(paths []string) (*Result, error) {
	start := time.Now()
	defer l.dropOffers()
	last := l.last
	l.last = nil // files change below: only a successful update or assemble sets it again
	files := len(l.files)
	var stale []*reading
	listed := make(map[string]bool, len(paths))
	for _, rel := range paths {
		rel = filepath.ToSlash(filepath.Clean(rel))
		if !IsConfigFile(rel) || listed[rel] {
			continue
		}
		listed[rel] = true
		info, err := fs.Stat(l.fsys, rel)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				l.removeFile(rel)
				continue
			}
			// The files listed before it are read all the same, as
			// they were before it was looked at.
			_, _, _ = l.storeAll(stale) // an error there is an earlier file's: this one's is reported
			return nil, fmt.Errorf("reading %s: %w", l.name, err)
		}
		if info.IsDir() {
			return l.Load()
		}
		if r := l.stale(rel, info, true); r != nil {
			stale = append(stale, r)
		}
	}
	l.writers, l.unsure = l.writers[:0], l.unsure[:0]
	before := make(map[string]*fileState, len(stale)) // what changed files held
	for _, r := range stale {
		before[r.rel] = l.files[r.rel]
	}
	reread, prepared, err := l.storeAll(stale)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", l.name, err)
	}
	for rel := range before {
		if l.files[rel] == nil { // gone since it was listed
			delete(before, rel)
		}
	}
	if len(l.files) != files {
		last = nil // a file was removed: resources went with it
	}
	res, err := l.update(last, before)
	if res == nil && err == nil {
		res, err = l.assemble()
	}
	if res != nil {
		res.Reread, res.Prepared, res.Took = reread, prepared, time.Since(start)
	}
	return res, err
}

// update makes the configuration from last, the previous assembly, when
// the files read again (before: what they held) define the same resources
// as before, with new contents only: the common case of an operator's
// change, which then costs the changed resources alone. It returns nil, nil
// when it cannot (no previous assembly, a resource added, removed or
// renamed, a node selector, a file with problems): the caller assembles
// everything.
func (l *Loader) update(last *assembly, before map[string]*fileState) (*Result, error) {
	if last == nil {
		return nil, nil
	}
	for rel, old := range before {
		now := l.files[rel]
		if old == nil || len(now.probs) > 0 || len(now.entries) != len(old.entries) {
			return nil, nil
		}
		for i, e := range now.entries {
			o := old.entries[i]
			if e.sel != nil || o.sel != nil || e.res.Type != o.res.Type || e.res.Name != o.res.Name {
				return nil, nil
			}
		}
	}
	res := *last.res
	res.Resources = slices.Clone(last.res.Resources)
	var probs []Problem
	for rel := range before {
		for _, e := range l.files[rel].entries {
			i, ok := last.at[key{e.res.Type, e.res.Name}]
			if !ok || len(e.res.Aliases) > 0 || len(res.Resources[i].Aliases) > 0 {
				return nil, nil // aliases (a virtual host's domains) are checked together: assemble
			}
			res.Resources[i] = e.res
			probs = append(probs, last.refs.problems(e)...)
		}
	}
	if len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	l.last = &assembly{res: &res, at: last.at, refs: last.refs}
	return &res, nil
}

// reading is a file to read again: it changed since it was last read.
type reading struct {
	rel   string
	stamp stamp
	prev  *fileState // what the file held when last read, if it was
	at    time.Time  // when the read began
	// What reading found.
	parsed
	prepared bool  // parsed is that of a file parsed ahead (Offer)
	gone     bool  // removed since it was listed
	err      error // another error reading it
	// moved: with watched set, the file changed while it was read.
	moved bool
	// What writerOpen, if set, found (walk: for Load); a file a writer
	// has open is left as it was.
	walk      bool
	writer    writerState
	writtenAt time.Time
}

// stale returns a reading of the file rel, whose current information is
// info, or nil if it is unchanged since it was last read: its stamp is
// the same, and not racy when an event named the file.
func (l *Loader) stale(rel string, info fs.FileInfo, named bool) *reading {
	st := stampOf(info)
	if f := l.files[rel]; f != nil && f.stamp == st && !(named && f.racy) {
		return nil
	}
	return &reading{rel: rel, stamp: st, prev: l.files[rel]}
}

// readAll reads and parses the files rs, several at once: parsing (YAML,
// JSON, the resources' own validation) is nearly all of a reload's cost,
// files do not depend on one another, and an operator's change may touch
// hundreds of them. A file whose bytes are those it held when last read (a
// generator that rewrites every file, a touch) is not parsed again: it
// keeps its resources, which then do not count as changed. It changes
// nothing in the loader.
func (l *Loader) readAll(rs []*reading) {
	read := func(r *reading) {
		if l.writerOpen != nil {
			if r.writtenAt, r.writer = l.writerOpen(r.rel, r.walk); r.writer != noWriter {
				return
			}
		}
		r.at = time.Now()
		data, err := fs.ReadFile(l.fsys, r.rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r.gone = true
		case err != nil:
			r.err = err
		case l.watched && changedSince(l.fsys, r.rel, r.stamp):
			r.moved = true
		default:
			sum := sha256.Sum256(data)
			if r.prev != nil && r.prev.sum == sum {
				r.parsed = r.prev.parsed
			} else if p := l.offered[r.rel]; p != nil && p.parsed.sum == sum {
				r.parsed, r.prepared = p.parsed, true
			} else {
				r.parsed = parse(r.rel, data, sum)
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(rs))
	if workers <= 1 {
		for _, r := range rs {
			read(r)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(rs)); i = next.Add(1) - 1 {
				read(rs[i])
			}
		})
	}
	wg.Wait()
}

// store records what reading r found: the file's new contents, or that it
// is gone.
func (l *Loader) store(r *reading) error {
	switch {
	case r.gone:
		l.removeFile(r.rel)
		return nil
	case r.err != nil:
		return r.err
	case r.moved:
		return nil // as it was: the change that moved it is on its way
	case r.writer == writing:
		l.writers = append(l.writers, writer{r.rel, r.writtenAt})
		return nil // as it was: Watch reads it once its writer closes it
	case r.writer == unsure:
		l.unsure = append(l.unsure, r.rel)
		return nil // as it was: Watch looks again shortly
	}
	if _, ok := l.files[r.rel]; !ok {
		l.paths = nil
	}
	racy := !r.stamp.mtime.Before(r.at.Add(-racyWindow))
	l.files[r.rel] = &fileState{stamp: r.stamp, parsed: r.parsed, racy: racy}
	return nil
}

// changedSince reports whether the file rel's stamp is no longer st (or
// it cannot be stated).
func changedSince(fsys fs.FS, rel string, st stamp) bool {
	info, err := fs.Stat(fsys, rel)
	return err != nil || stampOf(info) != st
}

func stampOf(info fs.FileInfo) stamp {
	return stamp{size: info.Size(), mtime: info.ModTime(), ctime: filestamp.ChangeTime(info), ino: inode(info)}
}

// assemble checks the files together: parse problems, duplicate names
// across files, and references.
func (l *Loader) assemble() (*Result, error) {
	paths := l.sortedPaths()
	total := 0
	for _, f := range l.files {
		total += len(f.entries)
	}
	var probs []Problem
	common := make(map[key]entry, total) // names every node sees
	scoped := make(map[key]entry)        // first selected definition of a name
	selected := make(map[key]bool)       // names defined under a selector
	all := make([]entry, 0, total)
	res := &Result{Files: len(paths), Resources: make([]*resource.Resource, 0, total)}
	for _, p := range paths {
		fsState := l.files[p]
		probs = append(probs, fsState.probs...)
		for _, e := range fsState.entries {
			k := key{e.res.Type, e.res.Name}
			prev, dup := common[k]
			if !dup && e.sel == nil && selected[k] {
				prev, dup = scoped[k], true
			}
			if dup {
				probs = append(probs, Problem{File: e.file, Resource: label(e.res),
					Reason: fmt.Sprintf("duplicate name: also defined in %s (resource #%d)", prev.file, prev.index)})
				continue
			}
			all = append(all, e)
			if e.sel == nil {
				common[k] = e
				res.Resources = append(res.Resources, e.res)
				continue
			}
			if !selected[k] {
				selected[k], scoped[k] = true, e
			}
			if n := len(res.Scoped); n == 0 || res.Scoped[n-1].Selector != e.sel {
				res.Scoped = append(res.Scoped, Scoped{Selector: e.sel})
			}
			sc := &res.Scoped[len(res.Scoped)-1]
			sc.Resources = append(sc.Resources, e.res)
		}
	}
	refs := namesOf(all)
	for _, e := range all {
		probs = append(probs, refs.problems(e)...)
	}
	probs = append(probs, aliasProblems(all)...)
	l.last = nil
	if len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	slices.SortFunc(res.Resources, func(a, b *resource.Resource) int {
		if a.Type != b.Type {
			return a.Type.Order - b.Type.Order
		}
		return strings.Compare(a.Name, b.Name)
	})
	at := make(map[key]int, len(res.Resources))
	for i, r := range res.Resources {
		at[key{r.Type, r.Name}] = i
	}
	l.last = &assembly{res: res, at: at, refs: refs}
	return res, nil
}

// key identifies a resource by type and name.
type key struct {
	t    *resource.Type
	name string
}

// SameGrouping reports whether two configurations put every node in the
// same group (their selectors are identical).
func (r *Result) SameGrouping(o *Result) bool {
	return o != nil && r.selectorKey() == o.selectorKey()
}

func label(r *resource.Resource) string { return fmt.Sprintf("%s %q", r.Type.Short, r.Name) }
