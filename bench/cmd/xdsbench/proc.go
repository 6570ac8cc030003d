package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a server under test running as a child process. Its output goes to
// a log file; its first stdout line starting with readyPrefix, if any, is
// delivered on ready.
type proc struct {
	name  string
	cmd   *exec.Cmd
	log   *os.File
	ready chan string   // the ready line (serve-* subcommands)
	out   chan struct{} // closed when stdout is drained
	exit  chan struct{} // closed when the process has exited
	err   error         // Wait's result, set before exit closes
}

// readyPrefix starts the line a serve-* subcommand prints on stdout once it
// listens: "XDSBENCH-READY xds=ADDR control=ADDR".
const readyPrefix = "XDSBENCH-READY "

// startProc starts bin with args. Its stderr (and stdout after the ready
// line) goes to logPath. The child is killed if this process dies (Linux),
// and must be stopped with stop.
func startProc(name, bin string, args []string, logPath string, env []string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logf, ready: make(chan string, 1), out: make(chan struct{}), exit: make(chan struct{})}
	go func() { // owned by p: ends when the child closes stdout
		defer close(p.out)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if s, ok := strings.CutPrefix(line, readyPrefix); ok {
				select {
				case p.ready <- s:
				default:
				}
				continue
			}
			fmt.Fprintln(logf, line)
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { // owned by p: ends when the child exits
		<-p.out
		p.err = cmd.Wait()
		close(p.exit)
	}()
	return p, nil
}

// pid returns the child's process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// waitReady returns the child's ready line, or an error if it exits first,
// ctx ends or timeout passes.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case s := <-p.ready:
		return s, nil
	case <-p.exit:
		return "", fmt.Errorf("%s exited before it was ready: %v (log: %s)", p.name, p.err, p.log.Name())
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		return "", fmt.Errorf("%s not ready after %v (log: %s)", p.name, timeout, p.log.Name())
	}
}

// stop sends SIGTERM, waits up to grace for the child to exit, then kills it
// and waits for it.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exit:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exit
	}
	p.log.Close()
}

// kill ends the child at once (SIGKILL), as a crash would, and waits for
// it.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exit
}

// exited reports whether the child has exited, and why.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.exit:
		return true, p.err
	default:
		return false, nil
	}
}

var (
	clkTckOnce sync.Once
	clkTck     = 100.0
)

// clockTicks returns the kernel's clock ticks per second (sysconf
// _SC_CLK_TCK), from getconf, or 100, the value on Linux.
func clockTicks() float64 {
	clkTckOnce.Do(func() {
		out, err := exec.Command("getconf", "CLK_TCK").Output()
		if err != nil {
			return
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			clkTck = v
		}
	})
	return clkTck
}

// cpuTicks returns utime+stime of process pid, in clock ticks, from
// /proc/PID/stat.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may
	// contain anything: state is field 3, utime 14, stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("malformed /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("malformed /proc stat")
	}
	return u + st, nil
}

// memStatus returns VmRSS and VmHWM (peak RSS) of process pid, in bytes,
// from /proc/PID/status.
func memStatus(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("malformed %s line %q", k, line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	return rss, hwm, nil
}

// freeAddr returns a loopback address with a port that was free a moment
// ago, for a child that has to be told its port.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// httpClient is used for control calls, readiness polls and profiles. It
// is loopback only and keeps its connections.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}

// call makes a bodiless request with httpClient; the caller closes the
// response's body.
func call(ctx context.Context, method, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	return httpClient.Do(req)
}

// pollHTTP polls url every interval until it answers 200, the child exits,
// ctx ends or timeout passes.
func pollHTTP(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := call(ctx, http.MethodGet, url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-tick.C:
		case <-p.exit:
			return fmt.Errorf("%s exited before it was ready: %v (log: %s)", p.name, p.err, p.log.Name())
		case <-ctx.Done():
			return fmt.Errorf("%s: %s did not answer 200 within %v (log: %s)", p.name, url, timeout, p.log.Name())
		}
	}
}
