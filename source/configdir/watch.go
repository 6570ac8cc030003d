package configdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Debounce is how long Watch waits after a file event for more of the same
// burst before reloading: long enough to gather the events of a writer that
// renames several files into place at once (microseconds apart; a
// Kubernetes ConfigMap's swap of its data directory is one burst), short
// enough not to matter next to pushing the change. MaxDelay bounds the wait
// under a continuous stream of events.
const (
	Debounce = time.Millisecond
	MaxDelay = 100 * time.Millisecond
)

// Watch reloads the loader's directory dir whenever a file in it (or in
// its subdirectories) changes, and calls apply with each configuration that
// loads or reject with each error, until ctx is done. It loads once at the
// start. apply and reject run on Watch's goroutine. A load that fails to
// read the directory (not one that finds problems in its files), or an
// error from the file watcher (events lost), makes the next load, on the
// next event, walk the whole directory: a file that stays unreadable then
// fails every load until it is mended.
func Watch(ctx context.Context, l *Loader, dir string, apply func(*Result), reject func(error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := addTree(w, dir); err != nil {
		return err
	}
	// changed collects the files named by the events of a burst; full is
	// set when a directory changed and the tree must be walked again.
	changed := map[string]bool{}
	full := true
	load := func() {
		var res *Result
		var err error
		if full {
			res, err = l.Load()
		} else {
			paths := make([]string, 0, len(changed))
			for p := range changed {
				paths = append(paths, p)
			}
			res, err = l.Reload(paths)
		}
		clear(changed)
		// A read that failed (not a configuration with problems, whose
		// files were all read) may have left changed files unread: the
		// next load walks the directory and reads whatever changed.
		var problems *Error
		full = err != nil && !errors.As(err, &problems)
		if err != nil {
			reject(err)
			return
		}
		apply(res)
	}
	load()
	var timer *time.Timer
	var fire <-chan time.Time
	var first time.Time
	// schedule arms the load for a change seen now: Debounce after the
	// last change, at most MaxDelay after the first.
	schedule := func() {
		now := time.Now()
		if timer == nil {
			first = now
			timer = time.NewTimer(Debounce)
			fire = timer.C
			return
		}
		wait := Debounce
		if rest := MaxDelay - now.Sub(first); rest < wait {
			wait = max(rest, 0)
		}
		timer.Reset(wait)
	}
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			rel, err := filepath.Rel(dir, ev.Name)
			if err != nil {
				continue
			}
			switch {
			case IsConfigFile(rel):
				changed[rel] = true
			case strings.HasPrefix(filepath.Base(rel), "."):
				continue // a writer's temporary file
			default:
				// A directory created, removed or renamed: walk again.
				if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
					if err := addTree(w, ev.Name); err != nil {
						reject(fmt.Errorf("watching %s: %w", ev.Name, err))
					}
				} else if filepath.Ext(rel) != "" {
					continue // some other file
				}
				full = true
			}
			schedule()
		case <-fire:
			timer, fire = nil, nil
			load()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// Events may have been lost (the kernel's queue overflowed):
			// walk the directory for whatever changed.
			reject(err)
			full = true
			schedule()
		}
	}
}

// addTree watches dir and its subdirectories, skipping hidden ones.
func addTree(w *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		return w.Add(path)
	})
}
