package etcdstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir"
	"github.com/xdsd/xdsd/source/etcdstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait for a replica.
const wait = 20 * time.Second

// refusalWait bounds an operation that etcd is expected to refuse at once.
const refusalWait = 2 * time.Second

// clusterFile is a file with an EDS cluster named name.
func clusterFile(name string) []byte {
	return fmt.Appendf(nil, `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %s
  type: EDS
  eds_cluster_config: {eds_config: {ads: {}}}
`, name)
}

// endpointsFile is a file with the endpoints of cluster name, on port.
func endpointsFile(name string, port int) []byte {
	return fmt.Appendf(nil, `resources:
- "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
  cluster_name: %s
  endpoints:
  - lb_endpoints:
    - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
`, name, port)
}

// service is a cluster and its endpoints, as two files.
func service(name string, port int) map[string][]byte {
	return map[string][]byte{
		"clusters/" + name + ".yaml":  clusterFile(name),
		"endpoints/" + name + ".yaml": endpointsFile(name, port),
	}
}

// loads is what a replica handed over, in order.
type loads struct {
	mu      sync.Mutex
	applied []*configdir.Result
	revs    []int64 // the revision of each of applied
	errs    []error
	changed chan struct{} // signalled at each
}

func (l *loads) apply(r *configdir.Result, rev int64) {
	l.add(func() { l.applied, l.revs = append(l.applied, r), append(l.revs, rev) })
}
func (l *loads) reject(err error) { l.add(func() { l.errs = append(l.errs, err) }) }
func (l *loads) add(f func()) {
	l.mu.Lock()
	f()
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// until waits for cond on the loads, failing the test after wait.
func (l *loads) until(t *testing.T, what string, cond func(applied []*configdir.Result, errs []error) bool) {
	t.Helper()
	deadline := time.After(wait)
	for {
		l.mu.Lock()
		ok := cond(l.applied, l.errs)
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("no %s within %v", what, wait)
		}
	}
}

// last returns the latest configuration applied.
func (l *loads) last() *configdir.Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.applied) == 0 {
		return nil
	}
	return l.applied[len(l.applied)-1]
}

// counts returns how many loads were applied and rejected.
func (l *loads) counts() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.applied), len(l.errs)
}

// port returns the port of cluster name's endpoints in r, 0 if none.
func port(r *configdir.Result, name string) int {
	if r == nil {
		return 0
	}
	for _, res := range r.Resources {
		if cla, ok := res.Message.(*endpointv3.ClusterLoadAssignment); ok && res.Name == name {
			return int(cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue())
		}
	}
	return 0
}

// names returns the names of r's resources of type url, sorted.
func names(r *configdir.Result, url string) []string {
	var out []string
	for _, res := range r.Resources {
		if res.Type.URL == url {
			out = append(out, res.Name)
		}
	}
	slices.Sort(out)
	return out
}

// startReplica runs a replica on cli until the test ends.
func startReplica(t *testing.T, cli *clientv3.Client) (*etcdstore.Replica, *loads) {
	t.Helper()
	r := etcdstore.NewReplica(etcdstore.Config{Client: cli, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ProbeInterval: 100 * time.Millisecond})
	l := &loads{changed: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, l.apply, l.reject) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	})
	return r, l
}

func apply(t *testing.T, cli *clientv3.Client, ch etcdstore.Change) etcdstore.Applied {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	a, err := etcdstore.Apply(ctx, cli, "", ch)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return a
}

func TestReplica(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	defer cli.Close()

	t.Run("an_apply_reaches_the_replica_whole", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		_, l := startReplica(t, cli)
		l.until(t, "first load", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 })
		if p := port(l.last(), "a"); p != 1001 {
			t.Fatalf("first load has a's endpoints on port %d, want 1001", p)
		}
		// Two files changed in one transaction: a renamed to b in both.
		// Apart, either would leave a reference unresolved.
		ch := etcdstore.Change{Files: service("b", 1002), Delete: []string{"clusters/a.yaml", "endpoints/a.yaml"}}
		a := apply(t, cli, ch)
		l.until(t, "the rename", func(a []*configdir.Result, _ []error) bool { return port(a[len(a)-1], "b") == 1002 })
		l.mu.Lock()
		rev := l.revs[len(l.revs)-1]
		l.mu.Unlock()
		if rev != a.Revision {
			t.Fatalf("the rename loaded as of revision %d, want the apply's, %d", rev, a.Revision)
		}
		if _, errs := l.counts(); errs != 0 {
			t.Fatalf("the replica rejected %d loads: it saw part of a transaction", errs)
		}
		if got := names(l.last(), resource.ClusterType); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("clusters %v, want [b]", got)
		}
	})

	t.Run("an_invalid_key_is_rejected_and_the_last_good_kept", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		_, l := startReplica(t, cli)
		l.until(t, "first load", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 })
		// Written around the checks of Apply, as etcdctl would.
		ctx := context.Background()
		if _, err := cli.Put(ctx, "/xdsd/config/0/endpoints/a.yaml", "resources: [{\"@type\": nope}]"); err != nil {
			t.Fatal(err)
		}
		l.until(t, "a rejection", func(_ []*configdir.Result, errs []error) bool { return len(errs) > 0 })
		l.mu.Lock()
		msg := l.errs[0].Error()
		n := len(l.applied)
		l.mu.Unlock()
		if !strings.Contains(msg, "/xdsd/config/0/") || !strings.Contains(msg, "endpoints/a.yaml") {
			t.Fatalf("rejection %q does not name the key", msg)
		}
		if _, err := cli.Put(ctx, "/xdsd/config/0/endpoints/a.yaml", string(endpointsFile("a", 1003))); err != nil {
			t.Fatal(err)
		}
		l.until(t, "the fix", func(a []*configdir.Result, _ []error) bool { return len(a) > n && port(a[len(a)-1], "a") == 1003 })
	})

	t.Run("etcd_killed_the_replica_serves_on_and_resumes", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		r, l := startReplica(t, cli)
		l.until(t, "first load", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 })
		waitStatus(t, r, "reachable", func(s etcdstore.Status) bool { return s.Reachable })
		srv.Kill()
		waitStatus(t, r, "unreachable", func(s etcdstore.Status) bool { return !s.Reachable })
		if a, e := l.counts(); a != 1 || e != 0 {
			t.Fatalf("with etcd down the replica loaded %d and rejected %d", a, e)
		}
		srv.Restart()
		waitStatus(t, r, "reachable again", func(s etcdstore.Status) bool { return s.Reachable })
		a := apply(t, cli, etcdstore.Change{Files: service("a", 1004)})
		l.until(t, "the change after the restart", func(ap []*configdir.Result, _ []error) bool { return port(ap[len(ap)-1], "a") == 1004 })
		waitStatus(t, r, "the revision", func(s etcdstore.Status) bool { return s.Revision >= a.Revision })
	})

	t.Run("compacted_while_cut_off_the_replica_reads_again", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		p := srv.NewProxy(t)
		pcli := etcdtest.NewClient(t, p.Endpoint)
		defer pcli.Close()
		r, l := startReplica(t, pcli)
		l.until(t, "first load", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 })
		p.Cut()
		waitStatus(t, r, "unreachable", func(s etcdstore.Status) bool { return !s.Reachable })
		apply(t, cli, etcdstore.Change{Files: service("a", 1005)})
		last := apply(t, cli, etcdstore.Change{Files: service("c", 1006)})
		if _, err := cli.Compact(context.Background(), last.Revision); err != nil {
			t.Fatal(err)
		}
		p.Restore()
		l.until(t, "the changes made while cut off", func(a []*configdir.Result, _ []error) bool {
			r := a[len(a)-1]
			return port(r, "a") == 1005 && port(r, "c") == 1006
		})
		if _, errs := l.counts(); errs != 0 {
			t.Fatalf("%d rejected loads", errs)
		}
	})
}

// waitStatus waits until the replica's status satisfies cond.
func waitStatus(t *testing.T, r *etcdstore.Replica, what string, cond func(etcdstore.Status) bool) {
	t.Helper()
	deadline := time.After(wait)
	tick := time.NewTicker(10 * time.Millisecond) // the status has no channel: poll it
	defer tick.Stop()
	for !cond(r.Status()) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("replica not %s within %v: %+v", what, wait, r.Status())
		}
	}
}

func TestApply(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	defer cli.Close()
	ctx := context.Background()

	t.Run("refuses_what_a_replica_would_reject_and_writes_nothing", func(t *testing.T) {
		before := apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		_, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: map[string][]byte{"clusters/b.yaml": clusterFile("b")}})
		cerr, ok := errors.AsType[*configdir.Error](err)
		if !ok || !strings.Contains(cerr.Error(), "clusters/b.yaml") {
			t.Fatalf("Apply of a cluster without endpoints = %v, want a *configdir.Error naming the file", err)
		}
		if resp, err := cli.Get(ctx, "/xdsd/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Header.Revision != before.Revision {
			t.Fatalf("etcd at revision %d after a refused apply, want %d (%v)", resp.Header.Revision, before.Revision, err)
		}
	})

	t.Run("if_revision_of_two_writers_one_wins", func(t *testing.T) {
		base := apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		errs := make(chan error, 2)
		for i := range 2 {
			go func() {
				_, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: service("a", 2000+i), IfRevision: base.Revision})
				errs <- err
			}()
		}
		var won, lost int
		for range 2 {
			err := <-errs
			if _, ok := errors.AsType[*etcdstore.ConflictError](err); ok {
				lost++
			} else if err == nil {
				won++
			} else {
				t.Fatalf("Apply: %v", err)
			}
		}
		if won != 1 || lost != 1 {
			t.Fatalf("%d won and %d got a conflict, want one each", won, lost)
		}
	})

	t.Run("prune_and_delete", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: merge(service("a", 1001), service("b", 1002)), Prune: true})
		a := apply(t, cli, etcdstore.Change{Delete: []string{"clusters/b.yaml", "endpoints/b.yaml"}})
		if a.Deleted != 2 || a.Written != 0 {
			t.Fatalf("delete: %+v", a)
		}
		if _, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Delete: []string{"clusters/b.yaml"}}); err == nil {
			t.Fatal("deleting a file that is not there succeeded")
		}
		a = apply(t, cli, etcdstore.Change{Files: service("c", 1003), Prune: true})
		if a.Deleted != 2 || a.Written != 2 {
			t.Fatalf("prune: %+v", a)
		}
		resp, err := cli.Get(ctx, "/xdsd/config/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
		}
		want := []string{"/xdsd/config/" + a.Generation + "/clusters/c.yaml", "/xdsd/config/" + a.Generation + "/endpoints/c.yaml"}
		if !slices.Equal(keys, want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
	})

	t.Run("10000_files_reach_a_watching_replica_whole", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		_, l := startReplica(t, cli)
		l.until(t, "first load", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 })
		const n = 10000
		files := service("a", 1001)
		for i := range n {
			name := fmt.Sprintf("e%05d", i)
			files["endpoints/"+name+".yaml"] = endpointsFile(name, 3000+i%1000)
		}
		a := apply(t, cli, etcdstore.Change{Files: files})
		if !a.NewGeneration || a.Written != n {
			t.Fatalf("apply of %d files: %+v, want a new generation", n, a)
		}
		l.until(t, "the 10,000 files", func(ap []*configdir.Result, _ []error) bool { return len(ap[len(ap)-1].Resources) == n+2 })
		l.mu.Lock()
		for i, r := range l.applied {
			if c := len(r.Resources); c != 2 && c != n+2 {
				t.Errorf("load %d has %d resources: part of the apply", i, c)
			}
		}
		l.mu.Unlock()
		if _, errs := l.counts(); errs != 0 {
			t.Fatalf("%d rejected loads", errs)
		}
		// The generation before is gone; a small change after it goes in
		// the new one, in one transaction.
		old, err := cli.Get(ctx, "/xdsd/config/0/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || old.Count != 0 {
			t.Fatalf("%d keys left in the generation before (%v)", old.Count, err)
		}
		b := apply(t, cli, etcdstore.Change{Files: map[string][]byte{"endpoints/a.yaml": endpointsFile("a", 1007)}})
		if b.NewGeneration || b.Generation != a.Generation || b.Written != 1 {
			t.Fatalf("a one-file change after it: %+v", b)
		}
		l.until(t, "the change after it", func(ap []*configdir.Result, _ []error) bool { return port(ap[len(ap)-1], "a") == 1007 })
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
	})

	t.Run("a_large_apply_cut_off_while_writing_changes_nothing", func(t *testing.T) {
		before := apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		files := service("a", 1001)
		for i := range 50 * etcdstore.MaxTxnOps { // many transactions, several in flight
			name := fmt.Sprintf("c%04d", i)
			files["endpoints/"+name+".yaml"] = endpointsFile(name, 3000+i%1000)
		}
		// Cut the apply off once its first transaction of the new
		// generation has been written.
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		watch := cli.Watch(wctx, "/xdsd/config/", clientv3.WithPrefix())
		watched := make(chan struct{})
		go func() { // owned by this test: ends with stopWatch
			defer close(watched)
			for resp := range watch {
				for _, ev := range resp.Events {
					if !strings.HasPrefix(string(ev.Kv.Key), "/xdsd/config/"+before.Generation+"/") {
						cancel()
					}
				}
			}
		}()
		if _, err := etcdstore.Apply(actx, cli, "", etcdstore.Change{Files: files}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Apply cut off while writing: %v, want context.Canceled", err)
		}
		stopWatch()
		<-watched
		cur, err := cli.Get(ctx, etcdstore.CurrentKey(""))
		if err != nil {
			t.Fatal(err)
		}
		if len(cur.Kvs) == 1 && string(cur.Kvs[0].Value) != before.Generation || len(cur.Kvs) == 0 && before.Generation != "0" {
			t.Fatalf("generation in force %v, want %s still", cur.Kvs, before.Generation)
		}
		// What an etcd server applied of a transaction cut off in flight
		// may outlive the writer's clean-up; the next large apply deletes
		// it with any generation neither in force nor marked.
		a := apply(t, cli, etcdstore.Change{Files: files})
		all, err := cli.Get(ctx, "/xdsd/config/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range all.Kvs {
			if !strings.HasPrefix(string(kv.Key), "/xdsd/config/"+a.Generation+"/") {
				t.Fatalf("key %s left outside the generation in force (%s)", kv.Key, a.Generation)
			}
		}
		if n := int64(len(all.Kvs)); n != int64(len(files)) {
			t.Fatalf("%d keys in the generation in force, want %d", n, len(files))
		}
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
	})

	t.Run("a_large_apply_deletes_the_generations_of_writers_that_died", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		// A writer that died writing: its generation, no longer marked.
		if _, err := cli.Put(ctx, "/xdsd/config/dead/endpoints/x.yaml", string(endpointsFile("x", 1))); err != nil {
			t.Fatal(err)
		}
		// A writer still writing: marked, under its lease.
		lease, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Revoke(ctx, lease.ID)
		if _, err := cli.Put(ctx, "/xdsd/staging/busy", "", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, "/xdsd/config/busy/endpoints/y.yaml", string(endpointsFile("y", 2))); err != nil {
			t.Fatal(err)
		}
		files := service("a", 1001)
		for i := range etcdstore.MaxTxnOps {
			name := fmt.Sprintf("g%03d", i)
			files["endpoints/"+name+".yaml"] = endpointsFile(name, 3000+i)
		}
		a := apply(t, cli, etcdstore.Change{Files: files})
		if !a.NewGeneration {
			t.Fatalf("apply of %d files: %+v, want a new generation", len(files), a)
		}
		count := func(prefix string) int64 {
			t.Helper()
			resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			return resp.Count
		}
		if n := count("/xdsd/config/dead/"); n != 0 {
			t.Errorf("%d keys left of the dead writer's generation", n)
		}
		if n := count("/xdsd/config/busy/"); n != 1 {
			t.Errorf("%d keys of the generation being written, want 1", n)
		}
		if n := count("/xdsd/staging/"); n != 1 {
			t.Errorf("%d staging keys, want the busy writer's alone (the apply's went with its switch)", n)
		}
		if n := count("/xdsd/config/" + a.Generation + "/"); n != int64(len(files)) {
			t.Errorf("%d keys in the new generation, want %d", n, len(files))
		}
		if _, err := cli.Delete(ctx, "/xdsd/config/busy/", clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
	})
}

// merge returns the union of file sets.
func merge(sets ...map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, s := range sets {
		maps.Copy(out, s)
	}
	return out
}

// BenchmarkApply10000 times an apply of 10,000 files, written as a new
// generation, until a watching replica has loaded it: each iteration
// changes every file (the ports move), so every file is read again.
func BenchmarkApply10000(b *testing.B) {
	srv := etcdtest.Start(b)
	cli := srv.Client()
	defer cli.Close()
	const n = 10000
	filesAt := func(gen int) map[string][]byte {
		files := make(map[string][]byte, n)
		for i := range n {
			name := fmt.Sprintf("e%05d", i)
			files["endpoints/"+name+".yaml"] = endpointsFile(name, 1000+(i+gen)%1000)
		}
		return files
	}
	ctx := context.Background()
	if _, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: filesAt(0), Prune: true}); err != nil {
		b.Fatal(err)
	}
	r := etcdstore.NewReplica(etcdstore.Config{Client: cli, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- r.Run(rctx, func(*configdir.Result, int64) {}, func(err error) { b.Error(err) })
	}()
	defer func() {
		cancel()
		<-done
	}()
	// The replica reports a revision once its load is applied.
	appliedAt := func(rev int64) {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for r.Status().Revision < rev {
			<-tick.C
		}
	}
	appliedAt(1)
	b.ResetTimer()
	for i := range b.N {
		a, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: filesAt(i + 1), Prune: true})
		if err != nil {
			b.Fatal(err)
		}
		appliedAt(a.Revision)
	}
}

// TestReplicaBadKey checks that a key that is no file's path, rejected,
// loses nothing: once it is gone the replica loads every file, those of
// its first read and those changed meanwhile.
func TestReplicaBadKey(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	defer cli.Close()
	ctx := context.Background()

	t.Run("bad_key_at_first_read_then_removed", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		if _, err := cli.Put(ctx, "/xdsd/config/0/x//y.yaml", "resources: []"); err != nil {
			t.Fatal(err)
		}
		_, l := startReplica(t, cli)
		l.until(t, "a rejection", func(_ []*configdir.Result, errs []error) bool { return len(errs) > 0 })
		if _, err := cli.Delete(ctx, "/xdsd/config/0/x//y.yaml"); err != nil {
			t.Fatal(err)
		}
		l.until(t, "a load", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 })
		got := names(l.last(), resource.ClusterType)
		if len(got) != 1 {
			t.Errorf("applied a configuration without cluster a: %v", got)
		}
	})

	t.Run("change_while_a_bad_key_is_there", func(t *testing.T) {
		apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
		_, l := startReplica(t, cli)
		l.until(t, "first load", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 })
		if _, err := cli.Put(ctx, "/xdsd/config/0/x//y.yaml", "resources: []"); err != nil {
			t.Fatal(err)
		}
		l.until(t, "a rejection", func(_ []*configdir.Result, errs []error) bool { return len(errs) > 0 })
		if _, err := cli.Put(ctx, "/xdsd/config/0/endpoints/a.yaml", string(endpointsFile("a", 1009))); err != nil {
			t.Fatal(err)
		}
		l.until(t, "a second rejection", func(_ []*configdir.Result, errs []error) bool { return len(errs) > 1 })
		if _, err := cli.Delete(ctx, "/xdsd/config/0/x//y.yaml"); err != nil {
			t.Fatal(err)
		}
		l.until(t, "a second load", func(a []*configdir.Result, _ []error) bool { return len(a) > 1 })
		if p := port(l.last(), "a"); p != 1009 {
			t.Errorf("after the bad key went the replica serves a on port %d, etcd holds 1009", p)
		}
	})
}

// TestReplicaTLS runs the store over TLS to an etcd that requires client
// certificates: a client with the CA and a certificate of it writes and
// reads; one without a certificate is refused.
func TestReplicaTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "etcd CA")
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	srvCert := ca.Issue(t, "etcd", true)
	cliCert := ca.Issue(t, "xdsd", false)
	caFile := write("ca.pem", ca.CertPEM)
	cfg := etcdstore.ClientConfig{CA: caFile, Cert: write("client.pem", cliCert.CertPEM), Key: write("client-key.pem", cliCert.KeyPEM)}
	srv := etcdtest.StartTLS(t, &etcdtest.TLS{
		CertFile: write("server.pem", srvCert.CertPEM), KeyFile: write("server-key.pem", srvCert.KeyPEM), CAFile: caFile,
		Client: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cliCert.TLSCertificate(t)}},
	})
	cfg.Endpoints = []string{srv.Endpoint}
	cli, err := etcdstore.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	apply(t, cli, etcdstore.Change{Files: service("a", 1001), Prune: true})
	_, l := startReplica(t, cli)
	l.until(t, "the load over TLS", func(a []*configdir.Result, _ []error) bool { return len(a) > 0 && port(a[len(a)-1], "a") == 1001 })

	cfg.Cert, cfg.Key = "", ""
	anon, err := etcdstore.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	ctx, cancel := context.WithTimeout(context.Background(), refusalWait)
	defer cancel()
	if _, err := etcdstore.Apply(ctx, anon, "", etcdstore.Change{Files: service("a", 1002)}); err == nil {
		t.Fatal("a client without a certificate wrote to an etcd that requires one")
	}
}
