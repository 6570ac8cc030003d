package connlimit_test

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/connlimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBoundPerAddress: past the bound, a client's connections are closed
// as they come and counted, while those it has open are served; once it
// closes one, it may open another. The connections accepted keep what a
// server uses of a socket.
func TestBoundPerAddress(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := connlimit.New(inner, 2, nil)
	accepted := make(chan net.Conn)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		lis.Close()
		<-done
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var served []net.Conn
	for range 2 {
		dial()
		c := <-accepted
		defer c.Close()
		if _, ok := c.(syscall.Conn); !ok {
			t.Fatalf("an accepted connection (%T) has no socket", c)
		}
		if _, ok := c.(interface{ CloseWrite() error }); !ok {
			t.Fatalf("an accepted connection (%T) cannot be closed one way", c)
		}
		served = append(served, c)
	}
	refused := dial()
	refused.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := refused.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a third connection from the address: read %v, want it closed", err)
	}
	if n := lis.Refused(); n != 1 {
		t.Errorf("%d connections counted refused, want 1", n)
	}
	served[0].Close()
	served[0].Close() // a second Close counts nothing
	dial()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("a connection after one was closed is not accepted")
	}
	if n := lis.Refused(); n != 1 {
		t.Errorf("%d connections counted refused, want 1", n)
	}
}
