package xdsctl

import (
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/source/etcdstore"
)

func TestApply(t *testing.T) {
	srv := etcdtest.Start(t)
	eps := "--etcd-endpoints=" + srv.Endpoint
	dir := configDir(t)

	// A replica, for --wait and replicas.
	code, out, errOut := run("apply", eps, dir)
	if code != exitOK || !strings.HasPrefix(out, "revision ") || !strings.Contains(out, "4 file(s) written") {
		t.Fatalf("apply = %d %q %q", code, out, errOut)
	}
	admin := startXDSD(t, daemon.Options{Etcd: daemon.EtcdOptions{ClientConfig: etcdstore.ClientConfig{Endpoints: []string{srv.Endpoint}}, ReplicaName: "replica-1"}}).Admin

	t.Run("wait_until_every_replica_read_it", func(t *testing.T) {
		writeFile(t, dir, "endpoints/hello.yaml", strings.ReplaceAll(endpointsYAML, "PORT", "50052"))
		code, out, errOut := run("apply", eps, "--wait", dir)
		if code != exitOK || !strings.Contains(out, "1 file(s) written") || !strings.Contains(out, "read by all 1 replica(s)") {
			t.Fatalf("apply --wait = %d %q %q", code, out, errOut)
		}
		code, out, _ = run("replicas", eps)
		if code != exitOK || !strings.Contains(out, "replica-1") || !strings.Contains(out, "APPLIED") {
			t.Fatalf("replicas = %d %q", code, out)
		}
		code, out, _ = run("apply", eps, "--wait", dir)
		if code != exitOK || !strings.HasPrefix(out, "unchanged: revision ") {
			t.Fatalf("apply of the same = %d %q", code, out)
		}
		rev := strings.Fields(out)[2]
		code, out, _ = run("status", "--admin", admin)
		if code != exitOK || !strings.Contains(out, "Replica replica-1: etcd prefix /xdsd/, revision "+rev+" ") {
			t.Fatalf("status = %d %q, want replica-1 at revision %s", code, out, rev)
		}
	})

	t.Run("refused_with_every_problem", func(t *testing.T) {
		code, out, errOut := run("delete", eps, "cluster.yaml") // the route and the endpoints name it
		if code != exitFail || !strings.Contains(out, "route.yaml") || !strings.Contains(errOut, "nothing was written") {
			t.Fatalf("delete of a cluster in use = %d %q %q", code, out, errOut)
		}
		code, _, errOut = run("delete", eps, "nope.yaml")
		if code != exitFail || !strings.Contains(errOut, "no such file") {
			t.Fatalf("delete of a missing file = %d %q", code, errOut)
		}
	})

	t.Run("if_revision_conflict", func(t *testing.T) {
		_, out, _ := run("apply", eps, dir)
		rev := strings.Fields(out)[2] // "unchanged: revision N"
		writeFile(t, dir, "endpoints/hello.yaml", strings.ReplaceAll(endpointsYAML, "PORT", "50053"))
		if code, out, errOut := run("apply", eps, "--if-revision", rev, dir); code != exitOK {
			t.Fatalf("apply --if-revision %s = %d %q %q", rev, code, out, errOut)
		}
		writeFile(t, dir, "endpoints/hello.yaml", strings.ReplaceAll(endpointsYAML, "PORT", "50054"))
		code, _, errOut := run("apply", eps, "--if-revision", rev, dir)
		if code != exitConflict || !strings.Contains(errOut, "conflict") {
			t.Fatalf("a second apply --if-revision %s = %d %q, want a conflict", rev, code, errOut)
		}
	})

	t.Run("etcd_unreachable", func(t *testing.T) {
		code, _, errOut := run("apply", "--etcd-endpoints=http://127.0.0.1:1", "--timeout=500ms", dir)
		if code != exitUnavailable {
			t.Fatalf("apply to nothing = %d %q, want %d", code, errOut, exitUnavailable)
		}
		if code, _, _ := run("apply", dir); code != exitUsage {
			t.Fatalf("apply without endpoints = %d, want %d", code, exitUsage)
		}
	})
}
