package configdir_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/xdsd/xdsd/source/configdir"
)

// BenchmarkReloadOneOf measures a reload after one file of n (one cluster
// and its endpoints each) was rewritten, as the watcher does it: the cost
// an operator pays per endpoint change at scale.
func BenchmarkReloadOneOf(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			for i := range n {
				write(b, dir, "eds/c"+strconv.Itoa(i)+".yaml", clusterYAML("c"+strconv.Itoa(i), i%60000+1))
			}
			l := configdir.NewLoader(dir)
			if _, err := l.Load(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				write(b, dir, "eds/c7.yaml", clusterYAML("c7", i%60000+1))
				b.StartTimer()
				res, err := l.Reload([]string{"eds/c7.yaml"})
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
	dir := b.TempDir()
	paths := make([]string, n)
	for i := range n {
		paths[i] = "eds/c" + strconv.Itoa(i) + ".yaml"
		write(b, dir, paths[i], clusterYAML("c"+strconv.Itoa(i), i+1))
	}
	l := configdir.NewLoader(dir)
	if _, err := l.Load(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j, p := range paths {
			port := j + 1
			if j == 7 {
				port = 10000 + i%50000
			}
			write(b, dir, p, clusterYAML("c"+strconv.Itoa(j), port))
		}
		b.StartTimer()
		res, err := l.Reload(paths)
		if err != nil || res.Reread != n {
			b.Fatalf("%v, reread %d", err, res.Reread)
		}
	}
}
