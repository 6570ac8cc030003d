package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/client"
	xdsdaemon "github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/resource"
)

// TestDaemon_churn_converges: xdsd under a configuration directory that
// keeps changing as generators change one (endpoint files renamed into
// place or rewritten in place, some with the bytes they held; clusters
// added, endpoints first, and removed, cluster first; a file broken and
// mended), Envoy-like clients of the four variants (CDS wildcard, then EDS
// for each cluster learned) that come and go, and xdsd restarted twice
// with the clients holding state, the second time with a file broken. At every tenth change, and at the end,
// every client holds exactly what the directory holds, and /status shows
// each of its streams SYNCED and no other stream.
func TestDaemon_churn_converges(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"xdsd", "grpc-go"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			churn(t, "--grpc-transport="+transport)
		})
	}
}

// churn is TestDaemon_churn_converges against xdsd serve with flag.
func churn(t *testing.T, flag string) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	cfg := newConfigDir(t)
	want := map[string]uint32{} // the directory's clusters and their endpoints' ports
	next := 0
	addCluster := func() {
		name := fmt.Sprintf("c%03d", next)
		next++
		want[name] = 1024 + rng.Uint32N(60000)
		cfg.write(churnEndpointsFile(name), endpointsYAML(name, fmt.Sprintf("127.0.0.1:%d", want[name])))
		cfg.write("clusters/"+name+".yaml", clusterYAML(name))
	}
	for range 12 {
		addCluster()
	}
	grace := "--shutdown-grace=200ms"
	d := startReady(t, nil, serveArgs(cfg.dir, grace, flag)...)

	var clients []*envoyLike
	open := func(i int) {
		clients = append(clients, newEnvoyLike(t, d.xds, fmt.Sprintf("churn-%d", i), i%2 == 0, i%4 < 2))
	}
	for i := range 8 {
		open(i)
	}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	loads := func(d *daemonProc) float64 {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		return d.metric(ctx, t, `xdsd_config_reloads_total{result="ok"}`) + d.metric(ctx, t, `xdsd_config_reloads_total{result="failed"}`)
	}
	checkpoint := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		eventually(ctx, t, what+": every client holds the directory's clusters and endpoints", func() (bool, string) {
			for _, c := range clients {
				if got := c.holds(); !maps.Equal(got, want) {
					return false, fmt.Sprintf("%s holds %v, want %v", c.node, got, want)
				}
			}
			return true, ""
		})
		d.waitStatus(ctx, t, what+": every client's streams SYNCED", func(s xdsdaemon.StatusReport) bool {
			streams := 0
			for _, c := range clients {
				streams += c.streams()
			}
			if len(s.Streams) != streams {
				return false
			}
			for _, st := range s.Streams {
				for _, te := range st.Types {
					if te.State != "SYNCED" {
						return false
					}
				}
			}
			return true
		})
	}
	checkpoint("at the start")

	broken := ""             // a cluster whose endpoints file holds invalid YAML
	done := map[string]int{} // how many changes of each kind, for the log
	breakFile := func(name string) {
		broken = name
		cfg.writeInPlace(churnEndpointsFile(name), "resources: [\n  {\"@type\": oops\n")
		done["files broken"]++
	}
	mend := func() {
		want[broken] = 1024 + rng.Uint32N(60000)
		cfg.write(churnEndpointsFile(broken), endpointsYAML(broken, fmt.Sprintf("127.0.0.1:%d", want[broken])))
		broken = ""
	}
	const changes = 150
	for n := 1; n <= changes; n++ {
		names := slices.Sorted(maps.Keys(want))
		name := names[rng.IntN(len(names))]
		op := rng.IntN(20)
		// A third of the changes wait for their load, so that its pushes
		// meet the next change.
		paced, loaded := rng.IntN(3) == 0, false
		var loadsBefore float64
		if paced {
			loadsBefore = loads(d)
		}
		switch {
		case op < 8: // an endpoints file, renamed into place or written in place
			want[name] = 1024 + rng.Uint32N(60000)
			content := endpointsYAML(name, fmt.Sprintf("127.0.0.1:%d", want[name]))
			if rng.IntN(2) == 0 {
				cfg.write(churnEndpointsFile(name), content)
				done["endpoints renamed into place"]++
			} else {
				cfg.writeInPlace(churnEndpointsFile(name), content)
				done["endpoints written in place"]++
			}
			loaded = true
			if name == broken {
				broken = ""
			}
		case op < 10: // an endpoints file rewritten with the bytes it holds
			if name != broken {
				cfg.write(churnEndpointsFile(name), cfg.files[churnEndpointsFile(name)])
				done["endpoints rewritten unchanged"]++
			}
		case op < 12:
			addCluster()
			done["clusters added"]++
			loaded = true
		case op < 14 && len(want) > 4 && name != broken:
			cfg.remove("clusters/" + name + ".yaml")
			cfg.remove(churnEndpointsFile(name))
			delete(want, name)
			done["clusters removed"]++
			loaded = true
		case op < 15 && broken == "":
			breakFile(name)
			loaded = true
		case op < 18: // a client replaced by a new one
			i := rng.IntN(len(clients))
			clients[i].close()
			clients = slices.Delete(clients, i, i+1)
			open(8 + n)
			done["clients replaced"]++
		}
		if paced && loaded {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			eventually(ctx, t, "a load after the change", func() (bool, string) {
				n := loads(d)
				return n > loadsBefore, fmt.Sprint(n, " loads")
			})
			cancel()
		}
		// Two restarts on the same port, the clients holding state: one
		// with the directory valid, one with a file broken, which leaves
		// xdsd with nothing to serve until it is mended (the clients wait).
		if n == changes/3 || n == 2*changes/3 {
			d.stop(t)
			args := serveArgs(cfg.dir, grace, flag, "--xds-addr", d.xds)
			if n == changes/3 {
				if broken != "" {
					mend()
				}
				d = startReady(t, nil, args...)
			} else {
				if broken == "" {
					breakFile(slices.Sorted(maps.Keys(want))[0])
				}
				d = startDaemon(t, nil, args...)
			}
		}
		if n%10 == 0 {
			if broken != "" {
				mend()
			}
			checkpoint(fmt.Sprintf("after change %d", n))
		}
	}
	t.Logf("%d clusters at the end; %v", len(want), done)
}

// churnEndpointsFile is the endpoints file of cluster name.
func churnEndpointsFile(name string) string { return "endpoints/" + name + ".yaml" }

// writeInPlace replaces the file rel with content as a shell redirection
// does: truncated, then written, under its own name.
func (c *configDir) writeInPlace(rel, content string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, rel), []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.files[rel] = content
}

// envoyLike is a client of the client library that subscribes as Envoy
// does: to every cluster, then to the endpoints of each cluster it holds.
type envoyLike struct {
	node string
	ads  bool
	c    *client.Client

	mu    sync.Mutex
	eds   map[string]func() // cluster -> its endpoints watch's cancel
	ports map[string]uint32 // cluster -> the port of its endpoints
	stop  func()            // the clusters watch's cancel
}

func newEnvoyLike(t *testing.T, addr, node string, ads, delta bool) *envoyLike {
	t.Helper()
	return newEnvoyLikeWith(t, client.Config{
		Node:        &corev3.Node{Id: node},
		Server:      addr,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		ADS:         ads,
		Delta:       delta,
	})
}

// newEnvoyLikeWith is newEnvoyLike with the client's configuration; a nil
// Backoff reconnects after 20 ms.
func newEnvoyLikeWith(t *testing.T, cfg client.Config) *envoyLike {
	t.Helper()
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 20 * time.Millisecond }
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &envoyLike{node: cfg.Node.GetId(), ads: cfg.ADS, c: c, eds: map[string]func(){}, ports: map[string]uint32{}}
	e.stop = c.Watch(resource.ClusterType, "*", clustersWatch{e})
	return e
}

// close cancels the watches and closes the client.
func (e *envoyLike) close() {
	e.stop()
	e.mu.Lock()
	for _, cancel := range e.eds {
		cancel()
	}
	e.mu.Unlock()
	e.c.Close()
}

// holds returns the clusters the client holds, each with its endpoints'
// port (0 if it holds none yet).
func (e *envoyLike) holds() map[string]uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]uint32{}
	for name := range e.eds {
		out[name] = e.ports[name]
	}
	return out
}

// streams is how many streams the client holds on the server.
func (e *envoyLike) streams() int {
	if e.ads {
		return 1
	}
	return 2 // clusters, endpoints
}

type clustersWatch struct{ e *envoyLike }

func (w clustersWatch) OnUpdate(u client.Update) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if _, ok := w.e.eds[u.Name]; !ok {
		w.e.eds[u.Name] = w.e.c.Watch(resource.EndpointType, u.Name, endpointsWatch(w))
	}
}

func (clustersWatch) OnError(error) {} // the restart's

func (w clustersWatch) OnDoesNotExist(name string) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if cancel, ok := w.e.eds[name]; ok {
		cancel()
		delete(w.e.eds, name)
		delete(w.e.ports, name)
	}
}

type endpointsWatch struct{ e *envoyLike }

func (w endpointsWatch) OnUpdate(u client.Update) {
	cla := u.Message.(*endpointv3.ClusterLoadAssignment)
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if _, ok := w.e.eds[u.Name]; ok {
		w.e.ports[u.Name] = cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
	}
}

func (endpointsWatch) OnError(error) {}

func (w endpointsWatch) OnDoesNotExist(name string) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	delete(w.e.ports, name)
}
