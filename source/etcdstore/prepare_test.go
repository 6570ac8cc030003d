package etcdstore_test

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/poll"
	"github.com/xdsd/xdsd/source/configdir"
	"github.com/xdsd/xdsd/source/etcdstore"
)

// TestReplicaParsesAhead: a replica parses the files of a generation
// while it is being written, but for those that hold what they hold in
// force, and the switch to it takes them; a file rewritten after it was
// parsed is served as rewritten.
func TestReplicaParsesAhead(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	defer cli.Close()
	ctx := context.Background()
	apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
	r, l := startReplica(t, cli)
	l.until(t, "the first load", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 })

	// Generation g1, written as Apply writes a large change: marked as
	// being written, then its files.
	const gen = "g1"
	files := service("a", 2001)
	for i := range 20 {
		for path, data := range service(fmt.Sprintf("s%02d", i), 3000+i) {
			files[path] = data
		}
	}
	if _, err := cli.Put(ctx, etcdstore.DefaultPrefix+"staging/"+gen, ""); err != nil {
		t.Fatal(err)
	}
	for path, data := range files {
		if _, err := cli.Put(ctx, etcdstore.FileKey("", gen, path), string(data)); err != nil {
			t.Fatal(err)
		}
	}
	// Every file but cluster a's, which holds what it holds in the
	// generation in force (its parse is kept already).
	poll.Until(t, wait, "the files of the generation being written parsed ahead", func() bool {
		return r.ParsedAhead(gen) == len(files)-1
	})
	// Rewritten after it was parsed: the switch must not take what was
	// parsed of it.
	if _, err := cli.Put(ctx, etcdstore.FileKey("", gen, "endpoints/a.yaml"), string(endpointsFile("a", 2002))); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut(etcdstore.CurrentKey(""), gen),
		clientv3.OpDelete(etcdstore.DefaultPrefix+"staging/"+gen),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	l.until(t, "a load of the new generation", func(a []*configdir.Result, _ []error) bool {
		return len(a) > 1 && a[len(a)-1].Files == len(files)
	})
	res := l.last()
	if got := port(res, "a"); got != 2002 {
		t.Errorf("cluster a's endpoints on port %d, want 2002 (the file as rewritten)", got)
	}
	if got := port(res, "s07"); got != 3007 {
		t.Errorf("cluster s07's endpoints on port %d, want 3007", got)
	}
	// Of the files read, cluster a's holds what it held before, and is
	// not parsed at all; the endpoints rewritten may be parsed ahead
	// again before the switch, or not.
	if res.Reread != len(files) || res.Prepared < len(files)-2 || res.Prepared > len(files)-1 {
		t.Errorf("the switch read %d files, %d of them parsed ahead; want %d read, %d or %d parsed ahead", res.Reread, res.Prepared, len(files), len(files)-2, len(files)-1)
	}
	if n := r.ParsedAhead(gen); n != 0 {
		t.Errorf("%d files of the generation in force still held as parsed ahead", n)
	}

	// A generation abandoned (its writer deleted what it wrote) leaves
	// nothing held.
	const abandoned = "g2"
	for path, data := range service("z", 4001) {
		if _, err := cli.Put(ctx, etcdstore.FileKey("", abandoned, path), string(data)); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, wait, "the abandoned generation's files parsed ahead", func() bool { return r.ParsedAhead(abandoned) == 2 })
	if _, err := cli.Delete(ctx, etcdstore.FileKey("", abandoned, ""), clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, wait, "the abandoned generation's files forgotten", func() bool { return r.ParsedAhead(abandoned) == 0 })
}
