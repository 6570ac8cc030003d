package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/source/configdir"
	"github.com/xdsd/xdsd/source/etcdstore"
)

// etcdReplicas is the number of xdsd replicas of the xdsd-etcd server.
const etcdReplicas = 3

// startXDSDEtcd runs etcd (the etcd binary on PATH, Debian's etcd-server)
// on loopback, writes the configuration to it as `xdsctl apply` does, and
// runs three replicas of `xdsd serve --etcd-endpoints` on it; a change is
// an apply of the changed endpoint files, which the round times from the
// apply's start, so that the etcd commit counts.
func startXDSDEtcd(ctx context.Context, e env, readyTimeout time.Duration) (*running, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("xdsd-etcd needs the etcd binary (Debian: etcd-server): %w", err)
	}
	clientAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	peerAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	url := "http://" + clientAddr
	data := filepath.Join(e.workDir, "etcd-data")
	if err := os.RemoveAll(data); err != nil {
		return nil, err
	}
	args := []string{"--name", "bench", "--data-dir", data,
		"--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", "http://" + peerAddr, "--initial-advertise-peer-urls", "http://" + peerAddr,
		"--initial-cluster", "bench=http://" + peerAddr, "--logger", "zap", "--log-level", "error"}
	e.log("starting %s %s", bin, strings.Join(args, " "))
	etcd, err := startProc("etcd", bin, args, filepath.Join(e.workDir, "etcd.log"), nil)
	if err != nil {
		return nil, err
	}
	r := &running{infra: []*proc{etcd}}
	fail := func(err error) (*running, error) {
		r.stop(time.Second)
		return nil, err
	}
	cli, err := etcdstore.NewClient(etcdstore.ClientConfig{Endpoints: []string{url}})
	if err != nil {
		return fail(err)
	}
	// The initial configuration, as the directory mode lays it out.
	dir := filepath.Join(e.workDir, "config")
	if err := os.RemoveAll(dir); err != nil {
		return fail(err)
	}
	if err := writeConfigDir(dir, e.clusters, e.endpoints); err != nil {
		return fail(err)
	}
	files, err := readDir(dir)
	if err != nil {
		return fail(err)
	}
	r.onStop = func() { cli.Close() }
	deadline := time.Now().Add(readyTimeout)
	for { // etcd takes a moment to answer
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = cli.Get(pctx, etcdstore.CurrentKey(""))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("etcd does not answer: %w", err))
		}
	}
	actx, cancel := context.WithDeadline(ctx, deadline)
	applied, err := etcdstore.Apply(actx, cli, "", etcdstore.Change{Files: files, Prune: true})
	cancel()
	if err != nil {
		return fail(fmt.Errorf("writing the configuration to etcd: %w", err))
	}
	for i := range etcdReplicas {
		xdsAddr, err := freeAddr()
		if err != nil {
			return fail(err)
		}
		adminAddr, err := freeAddr()
		if err != nil {
			return fail(err)
		}
		name := fmt.Sprintf("replica-%d", i+1)
		args := []string{"serve", "--etcd-endpoints", url, "--replica-name", name,
			"--xds-addr", xdsAddr, "--admin-addr", adminAddr, "--shutdown-grace", "1s"}
		args = append(args, e.xdsdFlags...)
		e.log("starting %s %s", e.xdsdBin, strings.Join(args, " "))
		p, err := startProc(srvXDSDEtcd+"-"+name, e.xdsdBin, args, filepath.Join(e.workDir, srvXDSDEtcd+"-"+name+".log"), nil)
		if err != nil {
			return fail(err)
		}
		r.replicas = append(r.replicas, p)
		r.xdsAddrs = append(r.xdsAddrs, xdsAddr)
		r.replicaPprof = append(r.replicaPprof, "http://"+adminAddr)
		if err := pollHTTP(ctx, p, "http://"+adminAddr+"/readyz", readyTimeout); err != nil {
			return fail(err)
		}
		if i == 0 {
			r.proc, r.xdsAddr, r.pprofBase = p, xdsAddr, "http://"+adminAddr
		}
	}
	r.stage = etcdStager(cli, e, applied.Generation)
	return r, nil
}

// etcdStager returns the stage function of the xdsd-etcd server. A change
// that fits one etcd transaction is committed as one: the changed endpoint
// files of the generation in force, with the rewrite of the generation key
// that every change makes, as xdsctl apply commits a small change (its
// check of the whole result before, which a deploy tool pays once per
// change, is left out: the round times what the fleet waits for). A larger
// change is what `xdsctl apply` does with it, check included: a new
// generation that one transaction makes current.
func etcdStager(cli *clientv3.Client, e env, gen string) func(ctx context.Context, g int, idx []int) (func() error, error) {
	return func(ctx context.Context, g int, idx []int) (func() error, error) {
		files := make(map[string][]byte, len(idx))
		size := 0
		for _, i := range idx {
			rel, err := filepath.Rel(e.workDir, claFile(e.workDir, i))
			if err != nil {
				return nil, err
			}
			files[filepath.ToSlash(rel)] = claYAML(i, e.endpoints, g)
			size += len(files[filepath.ToSlash(rel)])
		}
		if len(files)+1 > etcdstore.MaxTxnOps || size > etcdstore.MaxTxnBytes {
			return func() error {
				a, err := etcdstore.Apply(ctx, cli, "", etcdstore.Change{Files: files})
				gen = a.Generation
				return err
			}, nil
		}
		ops := make([]clientv3.Op, 0, len(files)+1)
		for rel, b := range files {
			ops = append(ops, clientv3.OpPut(etcdstore.FileKey("", gen, rel), string(b)))
		}
		ops = append(ops, clientv3.OpPut(etcdstore.CurrentKey(""), gen))
		return func() error {
			_, err := cli.Txn(ctx).Then(ops...).Commit()
			return err
		}, nil
	}
}

// readDir reads the configuration files under dir, by path relative to it.
func readDir(dir string) (map[string][]byte, error) {
	rels, err := configdir.ConfigFiles(os.DirFS(dir))
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(rels))
	for _, rel := range rels {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		files[rel] = b
	}
	return files, nil
}
