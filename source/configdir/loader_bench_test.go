package configdir_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/xdsd/xdsd/source/configdir"
)

// benchFile is the path of file i of a benchmark's directory, and
// benchYAML its contents with port p: one cluster and its endpoints.
func benchFile(i int) string       { return "eds/c" + strconv.Itoa(i) + ".yaml" }
func benchYAML(i, port int) string { return clusterYAML("c"+strconv.Itoa(i), port%60000+1) }

// loadedDir writes n files into a new directory and returns it with a
// loader that has loaded it.
func loadedDir(b *testing.B, n int) (string, *configdir.Loader) {
	dir := b.TempDir()
	for i := range n {
		write(b, dir, benchFile(i), benchYAML(i, i))
	}
	l := configdir.NewLoader(dir)
	if _, err := l.Load(); err != nil {
		b.Fatal(err)
	}
	return dir, l
}

// BenchmarkReloadOneOf measures a reload after one file of n (one cluster
// and its endpoints each) was rewritten, as the watcher does it: the cost
// an operator pays per endpoint change at scale; and after 100 of 1,000
// were, in one burst.
func BenchmarkReloadOneOf(b *testing.B) {
	for _, c := range []struct{ files, changed int }{{1000, 1}, {10000, 1}, {1000, 100}} {
		name := fmt.Sprintf("files=%d", c.files)
		if c.changed > 1 {
			name += fmt.Sprintf(",changed=%d", c.changed)
		}
		b.Run(name, func(b *testing.B) {
			dir, l := loadedDir(b, c.files)
			paths := make([]string, c.changed)
			for j := range paths {
				paths[j] = benchFile(7 + j)
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				for j, p := range paths {
					write(b, dir, p, benchYAML(7+j, c.files+i))
				}
				b.StartTimer()
				res, err := l.Reload(paths)
				if err != nil || res.Reread != c.changed {
					b.Fatalf("%v, reread %d", err, res.Reread)
				}
			}
		})
	}
}

// BenchmarkReloadAllRewritten measures a reload after a generator rewrote
// every one of 1,000 files, one of them with new contents: the files with
// the bytes they held are read but not parsed.
func BenchmarkReloadAllRewritten(b *testing.B) {
	const n = 1000
	dir, l := loadedDir(b, n)
	paths := make([]string, n)
	for i := range n {
		paths[i] = benchFile(i)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j, p := range paths {
			port := j
			if j == 7 {
				port = n + i
			}
			write(b, dir, p, benchYAML(j, port))
		}
		b.StartTimer()
		res, err := l.Reload(paths)
		if err != nil || res.Reread != n {
			b.Fatalf("%v, reread %d", err, res.Reread)
		}
	}
}
