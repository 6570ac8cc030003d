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
