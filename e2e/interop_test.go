package e2e_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	xdsdaemon "github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
	"github.com/xdsd/xdsd/resource"
)

// TestDaemon_interop_foreign_clients: clients on gRPC stacks other than
// grpc-go's hold ADS streams to xdsd's own transport (h2grpc), as Envoys and
// other xDS clients do: gRPC's C-core (Python's grpcio) and Node.js's
// @grpc/grpc-js (on nghttp2, the HTTP/2 library Envoy long used). Each sends
// an Envoy's node, some 30 KB, in every request, so that requests span
// several HTTP/2 frames; subscribes to every cluster; ACKs; is pushed a
// change on the same stream and ACKs it; then half-closes. xdsd must end
// the stream with OK, and /status must show the stream SYNCED. Between the
// first ACK and the change, the client starts and cancels a thousand other
// calls on its connection: C-core then resets streams it never sent HEADERS
// for, which must not end the connection (and the ADS stream on it). Each
// client does all this in cleartext and over mutual TLS (--tls-cert,
// --client-ca), as Envoys reaching a control plane elsewhere do.
//
// The clients are scripts under testdata/interop. `.ci/run` installs what
// they need (python3-grpcio from Debian, npm ci there) and sets
// XDSD_INTEROP=required; elsewhere a missing one is skipped.
func TestDaemon_interop_foreign_clients(t *testing.T) {
	t.Parallel()
	for _, c := range foreignClients(t) {
		for _, mode := range []string{"sotw", "delta"} {
			for _, mtls := range []bool{false, true} {
				name := c.name + "/" + mode
				if mtls {
					name += "/mtls"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					interop(t, c, mode, mtls)
				})
			}
		}
	}
}

func interop(t *testing.T, c foreignClient, mode string, mtls bool) {
	cfg := newConfigDir(t)
	cfg.writeService(dummyA)
	var serverArgs, clientArgs []string
	if mtls {
		serverArgs, clientArgs = mutualTLS(t)
	}
	d := startReady(t, nil, serveArgs(cfg.dir, serverArgs...)...)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	p := startForeign(ctx, t, c, append([]string{d.xds, mode}, clientArgs...))
	id := fmt.Sprintf("interop-%s-%s-%t", c.name, mode, mtls)
	node := interopNode(id)
	cds := resource.LookupShort("cds").URL

	// The subscription, the first response and its ACK, then a change: a
	// new cluster (with its endpoints) pushed on the same stream.
	var first, second []string
	if mode == "sotw" {
		p.send(&discovery.DiscoveryRequest{Node: node, TypeUrl: cds})
		resp := &discovery.DiscoveryResponse{}
		p.recv(resp)
		first = anyNames(t, resp.GetResources())
		p.send(&discovery.DiscoveryRequest{Node: node, TypeUrl: cds, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
		p.cancelCalls(1000)
		cfg.write("other.yaml", clusterYAML("other")+endpointsItemYAML("other", dummyB))
		p.recv(resp)
		second = anyNames(t, resp.GetResources())
		if want := cfg.versions()[cds]; resp.GetVersionInfo() != want {
			t.Errorf("pushed version %q, want %q", resp.GetVersionInfo(), want)
		}
		p.send(&discovery.DiscoveryRequest{Node: node, TypeUrl: cds, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
	} else {
		p.send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: cds})
		resp := &discovery.DeltaDiscoveryResponse{}
		p.recv(resp)
		first = deltaNames(resp)
		p.send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: cds, ResponseNonce: resp.GetNonce()})
		p.cancelCalls(1000)
		cfg.write("other.yaml", clusterYAML("other")+endpointsItemYAML("other", dummyB))
		p.recv(resp)
		second = deltaNames(resp)
		p.send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: cds, ResponseNonce: resp.GetNonce()})
	}
	if want := []string{svcCluster}; !slices.Equal(first, want) {
		t.Errorf("first response: clusters %v, want %v", first, want)
	}
	wantSecond := []string{svcCluster, "other"}
	if mode == "delta" {
		wantSecond = []string{"other"} // only what changed
	}
	slices.Sort(wantSecond)
	if !slices.Equal(second, wantSecond) {
		t.Errorf("pushed response: clusters %v, want %v", second, wantSecond)
	}
	d.waitStatus(ctx, t, fmt.Sprintf("node %q's clusters SYNCED", id), func(s xdsdaemon.StatusReport) bool {
		for _, st := range s.Streams {
			if st.NodeID != id || st.Variant != "ads/"+mode || st.LastError != "" {
				continue
			}
			i := slices.IndexFunc(st.Types, func(te xdsdaemon.TypeEntry) bool { return te.Type == "cds" })
			return i >= 0 && st.Types[i].State == "SYNCED"
		}
		return false
	})
	if code, details := p.end(); code != "0" {
		t.Errorf("stream ended with code %s (%s), want 0 (OK)", code, details)
	}
}

// mutualTLS writes a server's and a client's certificates, each from its
// CA, and returns xdsd's flags and the client's arguments (its CA, its
// certificate and its key).
func mutualTLS(t *testing.T) (serverArgs, clientArgs []string) {
	serverCA := testcerts.NewCA(t, "interop server CA")
	clientCA := testcerts.NewCA(t, "interop client CA")
	server, client := serverCA.Issue(t, "xdsd", true), clientCA.Issue(t, "interop client", false)
	dir := t.TempDir()
	files := map[string][]byte{"server.crt": server.CertPEM, "server.key": server.KeyPEM, "client-ca.crt": clientCA.CertPEM,
		"server-ca.crt": serverCA.CertPEM, "client.crt": client.CertPEM, "client.key": client.KeyPEM}
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data)
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	return []string{"--tls-cert", in("server.crt"), "--tls-key", in("server.key"), "--client-ca", in("client-ca.crt")},
		[]string{in("server-ca.crt"), in("client.crt"), in("client.key")}
}

// deltaNames returns the names of a delta response's resources, sorted.
func deltaNames(resp *discovery.DeltaDiscoveryResponse) []string {
	var names []string
	for _, r := range resp.GetResources() {
		names = append(names, r.GetName())
	}
	slices.Sort(names)
	return names
}

// interopNode is a node of an Envoy's size: an Envoy lists every extension
// it was built with, some 300.
func interopNode(id string) *corev3.Node {
	n := &corev3.Node{Id: id, Cluster: "interop", UserAgentName: "envoy"}
	for i := range 300 {
		name := fmt.Sprintf("envoy.filters.http.interop_%d", i)
		n.Extensions = append(n.Extensions, &corev3.Extension{Name: name, Category: "envoy.filters.http",
			TypeUrls: []string{"envoy.extensions.filters.http.interop_" + fmt.Sprint(i) + ".v3.Config"}})
	}
	return n
}

// A foreignClient runs testdata/interop's ADS client on another gRPC stack.
type foreignClient struct {
	name string
	argv []string // the command, before the address and the mode
}

// foreignClients returns the clients this machine can run. With
// XDSD_INTEROP=required a missing one fails the test; otherwise it is
// skipped, and said so.
func foreignClients(t *testing.T) []foreignClient {
	dir, err := filepath.Abs(filepath.Join("testdata", "interop"))
	if err != nil {
		t.Fatal(err)
	}
	var out []foreignClient
	missing := func(name, why string) {
		if os.Getenv("XDSD_INTEROP") == "required" {
			t.Errorf("interop client %s: %s", name, why)
		} else {
			t.Logf("interop client %s skipped: %s", name, why)
		}
	}
	python := ""
	for _, py := range []string{"/usr/bin/python3", "python3"} { // Debian's, which python3-grpcio goes with, first
		if exec.Command(py, "-c", "import grpc").Run() == nil {
			python = py
			break
		}
	}
	if python != "" {
		out = append(out, foreignClient{"grpc-c-core", []string{python, filepath.Join(dir, "ads.py")}})
	} else {
		missing("grpc-c-core", "no python3 that imports grpc (Debian: apt-get install python3-grpcio)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("grpc-js", "no node")
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js")); err != nil {
		missing("grpc-js", "no @grpc/grpc-js (npm ci in e2e/testdata/interop)")
	} else {
		out = append(out, foreignClient{"grpc-js", []string{"node", filepath.Join(dir, "ads.js")}})
	}
	return out
}

// foreignProc is a running foreign client: what it received, line by line.
type foreignProc struct {
	t     *testing.T
	ctx   context.Context
	stdin io.WriteCloser
	lines chan string // its stdout; closed when it ends
	done  chan error  // its exit
}

// startForeign starts client c with args (see testdata/interop/ads.py). It
// is killed, if still running, when the test ends.
func startForeign(ctx context.Context, t *testing.T, c foreignClient, args []string) *foreignProc {
	t.Helper()
	cmd := exec.Command(c.argv[0], append(c.argv[1:], args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", c.name, err)
	}
	p := &foreignProc{t: t, ctx: ctx, stdin: stdin, lines: make(chan string, 16), done: make(chan error, 1)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		<-read // Wait closes stdout: read it all first
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range p.lines { // let the reader finish
		}
		<-p.done
		if t.Failed() {
			t.Logf("%s's stderr:\n%s", c.name, stderr.String())
		}
	})
	return p
}

// send sends msg on the stream.
func (p *foreignProc) send(msg proto.Message) {
	p.t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := io.WriteString(p.stdin, hex.EncodeToString(b)+"\n"); err != nil {
		p.t.Fatalf("sending: %v", err)
	}
}

// cancelCalls has the client start n other calls on its connection and
// cancel each at once.
func (p *foreignProc) cancelCalls(n int) {
	p.t.Helper()
	if _, err := fmt.Fprintf(p.stdin, "CANCEL %d\n", n); err != nil {
		p.t.Fatalf("sending: %v", err)
	}
}

// next returns the client's next line.
func (p *foreignProc) next() string {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			err := <-p.done
			p.done <- err // for the cleanup
			p.t.Fatalf("the client ended: %v", err)
		}
		return line
	case <-p.ctx.Done():
		p.t.Fatalf("waiting for the client: %v", p.ctx.Err())
	}
	return ""
}

// recv decodes the next response into msg.
func (p *foreignProc) recv(msg proto.Message) {
	p.t.Helper()
	line := p.next()
	hexMsg, ok := strings.CutPrefix(line, "RECV ")
	if !ok {
		p.t.Fatalf("the client said %q, want a response", line)
	}
	b, err := hex.DecodeString(hexMsg)
	if err != nil {
		p.t.Fatal(err)
	}
	proto.Reset(msg)
	if err := proto.Unmarshal(b, msg); err != nil {
		p.t.Fatalf("response: %v", err)
	}
}

// end half-closes the stream and returns the status code and details the
// call ended with, once the client has exited.
func (p *foreignProc) end() (code, details string) {
	p.t.Helper()
	if err := p.stdin.Close(); err != nil {
		p.t.Fatal(err)
	}
	line := p.next()
	rest, ok := strings.CutPrefix(line, "END ")
	if !ok {
		p.t.Fatalf("the client said %q, want the call's end", line)
	}
	code, details, _ = strings.Cut(rest, " ")
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("the client exited: %v", err)
		}
		p.done <- err // for the cleanup
	case <-p.ctx.Done():
		p.t.Fatalf("the client did not exit: %v", p.ctx.Err())
	}
	return code, details
}
