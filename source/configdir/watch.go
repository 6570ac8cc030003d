package configdir

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Debounce is how long Watch waits after a file event for the burst to end
// before reloading (a writer's create, write and rename arrive together).
// MaxDelay bounds the wait under a continuous stream of events.
const (
	Debounce = 20 * time.Millisecond
	MaxDelay = 200 * time.Millisecond
)

// Watch reloads the loader's directory dir whenever a file in it (or in
// its subdirectories) changes, and calls apply with each configuration that
// loads or reject with each error, until ctx is done. It loads once at the
// start. apply and reject run on Watch's goroutine.
func Watch(ctx context.Context, l *Loader, dir string, apply func(*Result), reject func(error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := addTree(w, dir); err != nil {
		return err
	}
	load := func() {
		res, err := l.Load()
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
			if ev.Has(fsnotify.Create) {
				if info, err := os.Stat(ev.Name); err == nil && info.IsDir() && !strings.HasPrefix(filepath.Base(ev.Name), ".") {
					_ = addTree(w, ev.Name)
				}
			}
			if !relevant(dir, ev.Name) {
				continue
			}
			now := time.Now()
			if timer == nil {
				first = now
				timer = time.NewTimer(Debounce)
				fire = timer.C
				continue
			}
			wait := Debounce
			if rest := MaxDelay - now.Sub(first); rest < wait {
				wait = max(rest, 0)
			}
			timer.Reset(wait)
		case <-fire:
			timer, fire = nil, nil
			load()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			reject(err)
		}
	}
}

// relevant reports whether an event on path can change the configuration:
// a configuration file, or a directory (whose removal removes files).
func relevant(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return true
	}
	if IsConfigFile(rel) {
		return true
	}
	return filepath.Ext(rel) == "" && !strings.HasPrefix(filepath.Base(rel), ".")
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
