package bench

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	flagOthers = flag.Int("others", 0,
		"number of endpoint resources served besides the one that changes")
	flagStreamsPerConn = flag.Int("streams-per-conn", DefaultConfig.StreamsPerConn,
		"streams multiplexed on one client connection")
)

// target is a server under test, as it appears in benchmark names.
type target struct {
	name    string
	newPeer func(others int) (Peer, error)
}

// targets lists the servers that BenchmarkFanout compares, each in its best
// configuration.
var targets = []target{
	{"gcp-snapshot", func(others int) (Peer, error) {
		// One snapshot shared by all nodes; ads=false (ads=true only adds
		// sorting of watches, and rejects subset requests).
		return NewSnapshotPeer(SnapshotOptions{Others: others})
	}},
	{"gcp-linear", func(others int) (Peer, error) {
		return NewLinearPeer(LinearOptions{Others: others}), nil
	}},
}

// streamCounts are the numbers of subscribed streams benchmarked.
var streamCounts = []int{1000, 10000}

func benchConfig() Config {
	c := DefaultConfig
	c.StreamsPerConn = *flagStreamsPerConn
	return c
}

func modeName(delta bool) string {
	if delta {
		return "delta"
	}
	return "sotw"
}

// BenchmarkFanout publishes a change of one ClusterLoadAssignment to n
// subscribed ADS streams per iteration. Run with a fixed iteration count,
// e.g. -benchtime=10x: an iteration at 10,000 streams takes tens to hundreds
// of milliseconds, and each sub-benchmark pays a setup of all its streams.
func BenchmarkFanout(b *testing.B) {
	for _, t := range targets {
		for _, delta := range []bool{false, true} {
			for _, n := range streamCounts {
				b.Run(fmt.Sprintf("%s/%s/streams=%d", t.name, modeName(delta), n), func(b *testing.B) {
					peer, err := t.newPeer(*flagOthers)
					if err != nil {
						b.Fatal(err)
					}
					benchConfig().Run(b, peer, n, delta)
				})
			}
		}
	}
}

// BenchmarkGCPOptions compares go-control-plane settings that could matter
// for fan-out, at 1,000 streams: the SnapshotCache ads flag, one snapshot per
// node instead of one per group, and the SotW server's ordered ADS loop.
func BenchmarkGCPOptions(b *testing.B) {
	const n = 1000
	variants := []struct {
		name    string
		newPeer func() (Peer, error)
	}{
		{"snapshot-group", func() (Peer, error) { return NewSnapshotPeer(SnapshotOptions{Others: *flagOthers}) }},
		{"snapshot-group-ads", func() (Peer, error) {
			return NewSnapshotPeer(SnapshotOptions{Others: *flagOthers, ADS: true})
		}},
		{"snapshot-group-ordered", func() (Peer, error) {
			return NewSnapshotPeer(SnapshotOptions{Others: *flagOthers, OrderedADS: true})
		}},
		{"snapshot-pernode", func() (Peer, error) {
			return NewSnapshotPeer(SnapshotOptions{Others: *flagOthers, PerNode: true})
		}},
		{"linear", func() (Peer, error) { return NewLinearPeer(LinearOptions{Others: *flagOthers}), nil }},
		{"linear-ordered", func() (Peer, error) {
			return NewLinearPeer(LinearOptions{Others: *flagOthers, OrderedADS: true}), nil
		}},
	}
	for _, v := range variants {
		for _, delta := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/%s/streams=%d", v.name, modeName(delta), n), func(b *testing.B) {
				peer, err := v.newPeer()
				if err != nil {
					b.Skip(err)
				}
				benchConfig().Run(b, peer, n, delta)
			})
		}
	}
}

// TestHarness runs a few rounds of every target and option variant with
// few streams, in both modes, and checks that nothing is left running.
func TestHarness(t *testing.T) {
	defer goleak.VerifyNone(t)
	shortBenchtime(t)
	peers := map[string]func() (Peer, error){
		"gcp-snapshot-others": func() (Peer, error) { return NewSnapshotPeer(SnapshotOptions{Others: 50}) },
		"gcp-snapshot-ads":    func() (Peer, error) { return NewSnapshotPeer(SnapshotOptions{ADS: true, OrderedADS: true}) },
		"gcp-snapshot-pernode": func() (Peer, error) {
			return NewSnapshotPeer(SnapshotOptions{PerNode: true, Others: 5})
		},
		"gcp-linear-others": func() (Peer, error) { return NewLinearPeer(LinearOptions{Others: 50}), nil },
	}
	for _, tg := range targets {
		peers[tg.name] = func() (Peer, error) { return tg.newPeer(0) }
	}
	cfg := Config{StreamsPerConn: 7}
	for name, newPeer := range peers {
		for _, delta := range []bool{false, true} {
			t.Run(name+"/"+modeName(delta), func(t *testing.T) {
				res := testing.Benchmark(func(b *testing.B) {
					peer, err := newPeer()
					if err != nil {
						b.Fatal(err)
					}
					cfg.Run(b, peer, 30, delta)
				})
				if res.N == 0 {
					t.Fatal("benchmark failed (see its output)")
				}
				if res.Extra["ns/stream"] <= 0 {
					t.Errorf("no ns/stream metric: %v", res)
				}
			})
		}
	}
}

// TestMarker checks that VersionOf reads what NewCLA writes.
func TestMarker(t *testing.T) {
	for _, v := range []int{0, 1, 70000} {
		if got, ok := VersionOf(NewCLA(ClusterName, v)); !ok || got != v {
			t.Errorf("VersionOf(NewCLA(%d)) = %d, %v", v, got, ok)
		}
	}
}

func TestSnapshotADSWithOthersRejected(t *testing.T) {
	if _, err := NewSnapshotPeer(SnapshotOptions{ADS: true, Others: 1}); err == nil {
		t.Error("NewSnapshotPeer accepted ADS with Others > 0")
	}
}

// stuckPeer stops publishing after version 1.
type stuckPeer struct{ *LinearPeer }

func (p stuckPeer) Publish(version int) error {
	if version > 1 {
		return nil
	}
	return p.LinearPeer.Publish(version)
}

// TestHarnessDetectsLostUpdate checks that a round that never reaches the
// streams fails the benchmark (through the watchdog) and still cleans up.
func TestHarnessDetectsLostUpdate(t *testing.T) {
	defer goleak.VerifyNone(t)
	shortBenchtime(t)
	cfg := Config{StreamsPerConn: 3, RoundTimeout: time.Second}
	res := testing.Benchmark(func(b *testing.B) {
		cfg.Run(b, stuckPeer{NewLinearPeer(LinearOptions{})}, 10, false)
	})
	if res.N != 0 {
		t.Fatalf("benchmark with a stuck peer succeeded: %v", res)
	}
}

// shortBenchtime makes testing.Benchmark run 5 iterations until t ends,
// unless -test.benchtime was given.
func shortBenchtime(t *testing.T) {
	f := flag.Lookup("test.benchtime")
	if f == nil || f.Value.String() != f.DefValue {
		return
	}
	if err := f.Value.Set("5x"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(f.DefValue) })
}
