package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	xdsdaemon "github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/resource"
)

// ---------------------------------------------------------------------------
// The xdsd process.

// runXDSD runs the xdsd binary to its end.
func runXDSD(ctx context.Context, t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, xdsdBinary(t), args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		code = exit.ExitCode()
	default:
		t.Fatalf("xdsd %q: %v\nstderr: %s", args, err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// daemonProc is a running `xdsd serve`.
type daemonProc struct {
	cmd  *exec.Cmd
	log  *logBuffer // stdout and stderr
	xds  string     // bound addresses, from the "xdsd serving" log line
	adm  string
	rest string

	exited   chan struct{} // closed when the process has ended
	exitErr  error         // cmd.Wait's, set before exited is closed
	stopOnce sync.Once
}

// serveArgs returns the arguments of `xdsd serve` on dir, on loopback
// ports chosen by the kernel, with extra appended.
func serveArgs(dir string, extra ...string) []string {
	return append([]string{"serve", "--config-dir", dir,
		"--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--rest-addr", "127.0.0.1:0"}, extra...)
}

var servingLine = regexp.MustCompile(`msg="xdsd serving" xds=(\S+) admin=(\S+) rest=(\S+)`)

// startDaemon starts xdsd with args and the extra environment env, and
// waits for it to log the addresses it serves on. It is stopped with
// SIGTERM when the test ends (after the test's later cleanups, such as
// its ClientConns), and must then exit with status 0; its log is printed
// if the test failed.
func startDaemon(t *testing.T, env []string, args ...string) *daemonProc {
	t.Helper()
	d := &daemonProc{log: newLogBuffer(), exited: make(chan struct{})}
	d.cmd = exec.Command(xdsdBinary(t), args...)
	d.cmd.Env = append(cleanEnv(), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting xdsd: %v", err)
	}
	go func() {
		d.exitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("xdsd %q log (last %d lines):\n%s", args, maxDaemonLogLines, lastLines(d.log.String(), maxDaemonLogLines))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	m := d.waitLog(ctx, t, `the "xdsd serving" log line`, func(log string) []string { return servingLine.FindStringSubmatch(log) })
	d.xds, d.adm, d.rest = unquote(m[1]), unquote(m[2]), unquote(m[3])
	return d
}

// startReady is startDaemon for a valid configuration directory: it also
// waits until xdsd has loaded it (/readyz), so that clients connect to a
// daemon that has a configuration. (Clients that connect before the first
// load are TestDaemon_clients_before_first_load's business.)
func startReady(t *testing.T, env []string, args ...string) *daemonProc {
	t.Helper()
	d := startDaemon(t, env, args...)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	d.waitReady(ctx, t)
	return d
}

// waitReady polls /readyz until it answers 200.
func (d *daemonProc) waitReady(ctx context.Context, t *testing.T) {
	t.Helper()
	eventually(ctx, t, "/readyz 200", func() (bool, string) {
		code, body := d.get(ctx, t, "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
	})
}

// maxDaemonLogLines bounds the log printed for a failed test.
const maxDaemonLogLines = 80

// stop sends SIGTERM and waits for the process to end; it must end with
// status 0, within the time a graceful shutdown with no open streams takes.
func (d *daemonProc) stop(t *testing.T) {
	t.Helper()
	d.stopOnce.Do(func() {
		select {
		case <-d.exited:
			t.Errorf("xdsd ended before SIGTERM: %v", d.exitErr)
			return
		default:
		}
		start := time.Now()
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("SIGTERM: %v", err)
		}
		const limit = 5 * time.Second
		timer := time.NewTimer(2 * limit)
		defer timer.Stop()
		select {
		case <-d.exited:
		case <-timer.C:
			t.Errorf("xdsd still running %v after SIGTERM; killing it", 2*limit)
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		took := time.Since(start)
		if d.exitErr != nil {
			t.Errorf("xdsd ended with %v after SIGTERM, want status 0", d.exitErr)
		}
		if took > limit {
			t.Errorf("xdsd took %v to end after SIGTERM, want less than %v", took, limit)
		}
		if !strings.Contains(d.log.String(), `msg="xdsd shutting down"`) {
			t.Errorf(`xdsd did not log "xdsd shutting down"`)
		}
		if strings.Contains(d.log.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector found a data race in xdsd")
		}
	})
}

// kill ends the process with SIGKILL, as a crash or a lost machine does,
// and waits for it to end; the test's end then does not stop it.
func (d *daemonProc) kill() {
	d.stopOnce.Do(func() {
		_ = d.cmd.Process.Kill()
		<-d.exited
	})
}

// waitLog waits until match finds something in the whole log and returns
// it; it fails t if the process ends or ctx is done first.
func (d *daemonProc) waitLog(ctx context.Context, t *testing.T, what string, match func(string) []string) []string {
	t.Helper()
	for {
		log, changed := d.log.snapshot()
		if m := match(log); m != nil {
			return m
		}
		select {
		case <-changed:
		case <-d.exited:
			if m := match(d.log.String()); m != nil {
				return m
			}
			t.Fatalf("waiting for %s: xdsd ended: %v", what, d.exitErr)
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// waitLogLine waits for a log line holding every one of parts.
func (d *daemonProc) waitLogLine(ctx context.Context, t *testing.T, what string, parts ...string) string {
	t.Helper()
	return d.waitLog(ctx, t, fmt.Sprintf("a log line for %s with %q", what, parts), func(log string) []string {
		for _, line := range strings.Split(log, "\n") {
			if containsAll(line, parts) {
				return []string{line}
			}
		}
		return nil
	})[0]
}

// logHas reports whether a log line holds every one of parts.
func (d *daemonProc) logHas(parts ...string) bool { return d.lastLogLine(parts...) != "" }

// lastLogLine returns the last log line holding every one of parts.
func (d *daemonProc) lastLogLine(parts ...string) string {
	lines := strings.Split(d.log.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if containsAll(lines[i], parts) {
			return lines[i]
		}
	}
	return ""
}

// countLogLines counts the log lines holding every one of parts.
func (d *daemonProc) countLogLines(parts ...string) int {
	n := 0
	for _, line := range strings.Split(d.log.String(), "\n") {
		if containsAll(line, parts) {
			n++
		}
	}
	return n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// logEscape returns s as it appears inside a quoted value of a text log.
func logEscape(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// unquote undoes the quoting of a text log value.
func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// cleanEnv returns the environment without XDSD_* variables, so that the
// developer's own do not change the tests.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "XDSD_") {
			env = append(env, kv)
		}
	}
	return env
}

// logBuffer collects a process's output; snapshot tells when it grows.
type logBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{})} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

func (l *logBuffer) String() string {
	s, _ := l.snapshot()
	return s
}

func (l *logBuffer) snapshot() (string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.changed
}

// ---------------------------------------------------------------------------
// Admin HTTP.

// httpClient keeps no idle connections, which would outlive the tests.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// get GETs path from the admin port.
func (d *daemonProc) get(ctx context.Context, t *testing.T, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.adm+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// status returns /status.
func (d *daemonProc) status(ctx context.Context, t *testing.T) xdsdaemon.StatusReport {
	t.Helper()
	code, body := d.get(ctx, t, "/status")
	var st xdsdaemon.StatusReport
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	return st
}

// waitStatus polls /status until cond holds.
func (d *daemonProc) waitStatus(ctx context.Context, t *testing.T, what string, cond func(xdsdaemon.StatusReport) bool) xdsdaemon.StatusReport {
	t.Helper()
	var st xdsdaemon.StatusReport
	eventually(ctx, t, what+" in /status", func() (bool, string) {
		st = d.status(ctx, t)
		b, _ := json.Marshal(st)
		return cond(st), string(b)
	})
	return st
}

// waitSynced waits until /status shows one ADS SotW stream of node on
// which each type of want has been sent at that version and ACKed.
func (d *daemonProc) waitSynced(ctx context.Context, t *testing.T, node string, want map[string]string) xdsdaemon.StreamEntry {
	t.Helper()
	var found xdsdaemon.StreamEntry
	d.waitStatus(ctx, t, fmt.Sprintf("node %q SYNCED at %v", node, want), func(s xdsdaemon.StatusReport) bool {
		var streams []xdsdaemon.StreamEntry
		for _, st := range s.Streams {
			if st.NodeID == node && st.Variant == "ads/sotw" {
				streams = append(streams, st)
			}
		}
		if len(streams) != 1 {
			return false
		}
		found = streams[0]
		for url, v := range want {
			short := resource.Lookup(url).Short
			i := slices.IndexFunc(found.Types, func(te xdsdaemon.TypeEntry) bool { return te.Type == short })
			if i < 0 || found.Types[i].State != "SYNCED" || found.Types[i].SentVersion != v || found.Types[i].AckedVersion != v {
				return false
			}
		}
		return true
	})
	return found
}

// configDump returns /config_dump?node=node: the resources by type URL.
func (d *daemonProc) configDump(ctx context.Context, t *testing.T, node string) map[string][]*anypb.Any {
	t.Helper()
	code, body := d.get(ctx, t, "/config_dump?node="+node)
	var dump struct {
		Node      string                       `json:"node"`
		Resources map[string][]json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal([]byte(body), &dump); code != http.StatusOK || err != nil {
		t.Fatalf("/config_dump: %d %v\n%s", code, err, body)
	}
	if dump.Node != node {
		t.Errorf("/config_dump?node=%s: node %q", node, dump.Node)
	}
	out := map[string][]*anypb.Any{}
	for short, raws := range dump.Resources {
		var url string
		for _, ty := range resource.Types() {
			if ty.Short == short {
				url = ty.URL
			}
		}
		if url == "" {
			t.Errorf("/config_dump: unknown type %q", short)
			continue
		}
		for _, raw := range raws {
			a := &anypb.Any{}
			if err := protojson.Unmarshal(raw, a); err != nil {
				t.Fatalf("/config_dump %s: %v\n%s", short, err, raw)
			}
			out[url] = append(out[url], a)
		}
	}
	return out
}

// metric returns the value of one series of /metrics (it must be there).
func (d *daemonProc) metric(ctx context.Context, t *testing.T, series string) float64 {
	t.Helper()
	code, body := d.get(ctx, t, "/metrics")
	v, ok := metricValue(body, series)
	if code != http.StatusOK || !ok {
		t.Fatalf("/metrics: %d, no %s in\n%s", code, series, body)
	}
	return v
}

func metricValue(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// eventually polls f until it reports done, failing t with f's last
// description when ctx ends first.
func eventually(ctx context.Context, t *testing.T, what string, f func() (done bool, last string)) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		done, last := f()
		if done {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last: %s", what, ctx.Err(), last)
		}
	}
}
