package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Registration is what a replica says of itself under P+"replicas/"+Name,
// for xdsctl replicas and xdsctl apply --wait.
type Registration struct {
	// Name is the replica's name.
	Name string `json:"name"`
	// Addresses are where it serves: "xds", "admin", "rest".
	Addresses map[string]string `json:"addresses,omitempty"`
	// Revision is the latest revision of the configuration it read.
	Revision int64 `json:"revision"`
	// Generation is the generation in force at Revision.
	Generation string `json:"generation,omitempty"`
	// Error is why its latest read was rejected; empty if it was
	// applied.
	Error string `json:"error,omitempty"`
	// Streams is the number of xDS streams it serves.
	Streams int `json:"streams"`
	// Started is when it started.
	Started time.Time `json:"started"`
}

// registrationTTL is the lease of a registration: a replica gone without
// a word leaves the list this long after its last keepalive.
const registrationTTL = 10 // seconds

// Register keeps the replica's registration under its lease until ctx
// ends, and then deletes it. It writes report's registration when it
// changes, checking at each signal of changed (the replica's loads) and
// every interval (zero means five seconds: the count of streams); when
// etcd fails, it writes it again under a new lease once etcd answers.
// report must be safe to call from Register's goroutine.
func Register(ctx context.Context, cli *clientv3.Client, prefix string, interval time.Duration, changed <-chan struct{}, log *slog.Logger, report func() Registration) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if interval <= 0 {
		interval = 5 * time.Second
	}
	l := layout{prefix}
	wait := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	for ctx.Err() == nil {
		err := register(ctx, cli, l, interval, changed, report)
		if ctx.Err() != nil {
			return
		}
		if wait.cur == 0 {
			log.Warn("registering the replica in etcd failed; trying again", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.next()):
		}
	}
}

// register is one lease's life of the registration.
func register(ctx context.Context, cli *clientv3.Client, l layout, interval time.Duration, changed <-chan struct{}, report func() Registration) error {
	lease, err := cli.Grant(ctx, registrationTTL)
	if err != nil {
		return err
	}
	defer func() { // the registration goes with its lease
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_, _ = cli.Revoke(rctx, lease.ID)
		cancel()
	}()
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	alive, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		return err
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last []byte
	for {
		r := report()
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if string(b) != string(last) {
			if _, err := cli.Put(ctx, l.replicas()+r.Name, string(b), clientv3.WithLease(lease.ID)); err != nil {
				return err
			}
			last = b
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-alive:
			if !ok {
				return fmt.Errorf("the lease of the registration was lost")
			}
		case <-changed:
		case <-tick.C:
		}
	}
}

// Replicas returns the registrations of the live replicas, by name.
func Replicas(ctx context.Context, cli *clientv3.Client, prefix string) ([]Registration, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	l := layout{prefix}
	resp, err := cli.Get(ctx, l.replicas(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]Registration, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r Registration
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Registration) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// WaitApplied waits until every live replica has read revision rev (or a
// later one), polling every interval until ctx ends. It returns the
// replicas as they were then: those whose read was rejected say why.
func WaitApplied(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, interval time.Duration) ([]Registration, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rs, err := Replicas(ctx, cli, prefix)
		if err == nil {
			behind := 0
			for _, r := range rs {
				if r.Revision < rev {
					behind++
				}
			}
			if behind == 0 {
				return rs, nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("replicas behind revision %d: %w", rev, ctx.Err())
			}
			return rs, err
		case <-t.C:
		}
	}
}
