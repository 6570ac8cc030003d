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
// an operator pays per endpoint change at scale.
func BenchmarkReloadOneOf(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			dir, l := loadedDir(b, n)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				write(b, dir, benchFile(7), benchYAML(7, n+i))
				b.StartTimer()
				res, err := l.Reload([]string{benchFile(7)})
				if err != nil || res.Reread != 1 {
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
