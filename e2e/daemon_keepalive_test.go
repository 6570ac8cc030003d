package e2e_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestDaemon_keepalive: with --keepalive-time and --keepalive-timeout, on
// either transport, xdsd pings a connection that sends nothing, keeps one
// whose client answers, and closes one whose client does not. (grpc-go's
// transport pings no sooner than a second.)
func TestDaemon_keepalive(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"xdsd", "grpc-go"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, nil, serveArgs(newConfigDir(t).dir, "--grpc-transport="+transport,
				"--keepalive-time=20ms", "--keepalive-timeout=200ms")...)
			silent, answering := dialHTTP2(t, d.xds), dialHTTP2(t, d.xds)
			answered := make(chan error, 1)
			go func() { answered <- answerPings(answering, 3) }()
			pings, err := readPings(silent, nil)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the connection that answers no ping is still open after %d pings", pings)
			}
			if pings == 0 {
				t.Errorf("the connection that answers no ping was closed without one (%v)", err)
			}
			if err := <-answered; err != nil {
				t.Errorf("the connection that answers: %v", err)
			}
		})
	}
}

// dialHTTP2 opens a connection to addr, closed when the test ends, and
// starts HTTP/2 on it; it returns a framer on it. Reads and writes fail
// after 20 s.
func dialHTTP2(t *testing.T, addr string) *http2.Framer {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	fr := http2.NewFramer(nc, nc)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr
}

// readPings reads the server's frames until an error, passing each PING
// that is not an answer to answer (if not nil), and returns how many came
// and the error.
func readPings(fr *http2.Framer, answer func(*http2.PingFrame) error) (int, error) {
	pings := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return pings, err
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			pings++
			if answer != nil {
				if err := answer(p); err != nil {
					return pings, err
				}
			}
		}
	}
}

// errEnough ends answerPings's reading.
var errEnough = errors.New("enough pings")

// answerPings answers the server's pings on fr until n have come.
func answerPings(fr *http2.Framer, n int) error {
	_, err := readPings(fr, func(p *http2.PingFrame) error {
		if err := fr.WritePing(true, p.Data); err != nil {
			return err
		}
		if n--; n == 0 {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}
