//go:build unix

package h2grpc

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// idleConn returns a connection of a new server (not serving: the test
// runs its keepalive checks) over the server's end of a loopback TCP
// connection, ready to write, and the client's end. Its progress is what
// the client's TCP has acknowledged, as on Linux, unless the test's name
// ends in "/sent": then it is what the socket has taken, as elsewhere.
func idleConn(t *testing.T) (*Server, *conn, io.Reader) {
	t.Helper()
	client, server := tcpPair(t)
	s := NewServer(Options{KeepaliveTime: time.Hour, KeepaliveTimeout: time.Minute})
	c := newConn(s, server)
	c.w, c.ready = newWriter(server, socketOf(server), &c.ka.sent), true
	if !strings.HasSuffix(t.Name(), "/sent") {
		c.ka.rc = socketOf(server) // as the handshake sets it
	}
	c.ka.started.Store(true)
	s.conns[c] = struct{}{}
	t.Cleanup(s.ka.wg.Wait)
	return s, c, client
}

// forProgress runs test twice: progress read from the client's TCP, and
// from the socket's writes (see idleConn).
func forProgress(t *testing.T, test func(*testing.T)) {
	for _, name := range []string{"acked", "sent"} {
		t.Run(name, test)
	}
}

// checkWithin runs s's keepalive check at now, failing the test if it
// waits for more than 5 s.
func checkWithin(t *testing.T, s *Server, now time.Time) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		s.checkAlive(now)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the keepalive check waited for a connection")
	}
}

// TestKeepalivePingOnFullSocket: a ping that falls due on a connection
// whose socket is full, with no write under way, is written by a goroutine
// of its own once the client reads, after what the socket held; the check
// does not wait for it. While the client drains what is before its ping,
// the wait for its answer is put off; once nothing moves for
// KeepaliveTimeout, the check aborts the connection.
func TestKeepalivePingOnFullSocket(t *testing.T) {
	forProgress(t, testKeepalivePingOnFullSocket)
}

func testKeepalivePingOnFullSocket(t *testing.T) {
	s, c, client := idleConn(t)
	// Buffers of a set size: the kernel's tuning could grow them once the
	// test has filled them, and take the ping at once.
	if err := c.raw.(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	written := make(chan struct{})
	s.ka.sent = func() { close(written) }
	var sent bytes.Buffer
	chunk := bytes.Repeat([]byte{7}, 64<<10)
	for {
		n, err := c.w.(tryWriter).tryWrite(chunk)
		if err != nil {
			t.Fatal(err)
		}
		sent.Write(chunk[:n])
		if n < len(chunk) {
			break // full
		}
	}
	t0 := time.Now()
	checkWithin(t, s, t0)
	checkWithin(t, s, t0.Add(time.Hour)) // due
	if c.wmu.TryLock() {
		t.Fatal("the ping's goroutine does not hold wmu while the socket is full")
	}
	want := append(sent.Bytes(), appendPing(nil, 0, keepalivePing[:])...)
	var got bytes.Buffer
	read := func(max int) {
		t.Helper()
		if _, err := io.CopyN(&got, client, int64(max)); err != nil {
			t.Fatal(err)
		}
	}
	for seen := c.progress(); c.progress() == seen; {
		read(min(64<<10, len(want)-1-got.Len()))
	}
	checkWithin(t, s, t0.Add(time.Hour+time.Minute))
	if aborts := s.ka.aborts.Load(); aborts != 0 {
		t.Fatal("aborted while the client drained what was before its ping")
	}
	read(len(want) - got.Len())
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the client did not read what the socket held, then the ping")
	}
	<-written
	if !c.wmu.TryLock() {
		t.Fatal("wmu not given back after the ping's write")
	}
	c.wmu.Unlock()

	// No answer: aborted once the socket's progress has stood still for
	// KeepaliveTimeout (the look just after the drain may still see it).
	for i := 2; i <= 3 && s.ka.aborts.Load() == 0; i++ {
		checkWithin(t, s, t0.Add(time.Hour+time.Duration(i)*time.Minute))
	}
	if aborts := s.ka.aborts.Load(); aborts != 1 {
		t.Fatalf("%d connections aborted, want 1", aborts)
	}
	if n, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the abort the client read %d bytes, %v; want EOF", n, err)
	}
}

// TestKeepaliveAbortsBusyConnection: a connection due for a ping whose
// writes are found under way at every look, with nothing read and no
// progress, is aborted KeepaliveTime and KeepaliveTimeout after its last
// sign of life, without a ping.
func TestKeepaliveAbortsBusyConnection(t *testing.T) {
	s, c, client := idleConn(t)
	t0 := time.Now()
	checkWithin(t, s, t0)
	c.wmu.Lock() // a write under way
	checkWithin(t, s, t0.Add(time.Hour))
	checkWithin(t, s, t0.Add(time.Hour+time.Minute-time.Millisecond))
	if aborts := s.ka.aborts.Load(); aborts != 0 {
		t.Fatalf("aborted before KeepaliveTimeout")
	}
	checkWithin(t, s, t0.Add(time.Hour+time.Minute))
	c.wmu.Unlock()
	if pings, aborts := s.ka.pings.Load(), s.ka.aborts.Load(); pings != 0 || aborts != 1 {
		t.Fatalf("%d pings and %d aborts, want none and 1", pings, aborts)
	}
	if n, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the abort the client read %d bytes, %v; want EOF", n, err)
	}
}

// TestFlushWithoutWaitKeepsTheRest: a flush that does not wait writes what
// the socket takes and keeps the rest, which a flush that waits writes
// after it.
func TestFlushWithoutWaitKeepsTheRest(t *testing.T) {
	_, c, client := idleConn(t)
	want := make([]byte, 32<<20)
	for i := range want {
		want[i] = byte(i * 7 / 5)
	}
	c.wmu.Lock()
	c.wbuf = append(c.bufLocked(), want...)
	done, err := c.flush(true)
	if done || err != nil {
		t.Fatalf("flush(true) of %d bytes = %v, %v; want false, nil", len(want), done, err)
	}
	if left := len(c.wbuf); left == 0 || left == len(want) {
		t.Fatalf("%d of %d bytes left", left, len(want))
	}
	flushed := make(chan error, 1)
	go func() {
		flushed <- c.flushLocked()
		c.wmu.Unlock()
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the client read other bytes than were flushed")
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
}

// TestKeepaliveSparesSlowReader: a client that has a ping out and reads a
// long send slowly, whose writes hold wmu (and with it the connection's
// reader, which would answer the client's frames), is not aborted while
// the socket takes bytes between the check's looks, however long apart;
// once the send is done and nothing has been read for KeepaliveTimeout
// since its last progress, it is.
func TestKeepaliveSparesSlowReader(t *testing.T) {
	forProgress(t, testKeepaliveSparesSlowReader)
}

func testKeepaliveSparesSlowReader(t *testing.T) {
	s, c, client := idleConn(t)
	t0 := time.Now()
	checkWithin(t, s, t0)
	now := t0.Add(time.Hour)
	checkWithin(t, s, now) // pinged, the socket being empty
	ping := appendPing(nil, 0, keepalivePing[:])
	msg := make([]byte, 32<<20)
	// The send holds wmu until released, so that every look below finds
	// it under way.
	locked, done, release := make(chan struct{}), make(chan error, 1), make(chan struct{})
	unlocked := make(chan struct{}) // closed once the send has given wmu back
	go func() {
		c.wmu.Lock()
		close(locked)
		c.wbuf = append(c.bufLocked(), msg...)
		done <- c.flushLocked()
		<-release
		c.wmu.Unlock()
		close(unlocked)
	}()
	<-locked
	buf, got, total := make([]byte, 256<<10), 0, len(ping)+len(msg)
	for got < total {
		seen := c.progress()
		for got < total && c.progress() == seen {
			n, err := client.Read(buf[:min(len(buf), total-got)])
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		if c.progress() == seen {
			break // all read, and no progress since the last look
		}
		now = now.Add(time.Minute)
		checkWithin(t, s, now)
		if aborts := s.ka.aborts.Load(); aborts != 0 {
			t.Fatalf("aborted after %d of %d bytes, though the socket took bytes between every look", got, total)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(release)
	<-unlocked
	checkWithin(t, s, now.Add(time.Minute/2)) // the ping's time to be answered runs from the send's last progress
	if aborts := s.ka.aborts.Load(); aborts != 0 {
		t.Fatal("aborted less than KeepaliveTimeout after the send's last progress")
	}
	for i := 3; i <= 5 && s.ka.aborts.Load() == 0; i += 2 {
		checkWithin(t, s, now.Add(time.Duration(i)*time.Minute/2))
	}
	if aborts := s.ka.aborts.Load(); aborts != 1 {
		t.Fatalf("%d aborts once the send is done and the ping not answered, want 1", aborts)
	}
}

// TestKeepaliveLeavesHandshakeAlone: a connection still in its handshake
// (a TLS handshake reads the socket without marking it alive) is left to
// HandshakeTimeout: the check neither pings nor aborts it.
func TestKeepaliveLeavesHandshakeAlone(t *testing.T) {
	s, c, _ := idleConn(t)
	c.ka.started.Store(false)
	c.ready = false
	t0 := time.Now()
	for i := range 4 {
		checkWithin(t, s, t0.Add(time.Duration(i)*time.Hour))
	}
	if pings, aborts := s.ka.pings.Load(), s.ka.aborts.Load(); pings != 0 || aborts != 0 {
		t.Fatalf("%d pings and %d aborts of a connection in its handshake, want none", pings, aborts)
	}
}

// TestKeepaliveStuckSendAbortsOnTime: once a connection is due a ping, the
// check reads its progress at every look, so that a send that stops moving
// is aborted KeepaliveTime and KeepaliveTimeout after its last progress,
// not a KeepaliveTime later.
func TestKeepaliveStuckSendAbortsOnTime(t *testing.T) {
	s, c, _ := idleConn(t)
	moved := func() {
		t.Helper()
		seen := c.progress()
		if _, err := c.raw.Write(make([]byte, 1<<10)); err != nil { // the send's bytes, past wmu
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); c.progress() == seen; runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatal("the client's TCP acknowledged nothing in 10 s")
			}
		}
	}
	c.wmu.Lock() // a send under way
	defer c.wmu.Unlock()
	t0 := time.Now()
	checkWithin(t, s, t0)
	checkWithin(t, s, t0.Add(time.Hour)) // due: watched from now on
	moved()
	t1 := t0.Add(time.Hour + time.Second)
	checkWithin(t, s, t1) // sees it move
	moved()
	t2 := t1.Add(time.Second)
	checkWithin(t, s, t2) // sees it move again: the last progress
	checkWithin(t, s, t2.Add(time.Hour+time.Minute-time.Millisecond))
	if aborts := s.ka.aborts.Load(); aborts != 0 {
		t.Fatal("aborted before KeepaliveTime and KeepaliveTimeout had passed since the last progress")
	}
	checkWithin(t, s, t2.Add(time.Hour+time.Minute))
	if aborts := s.ka.aborts.Load(); aborts != 1 {
		t.Fatalf("%d aborts KeepaliveTime and KeepaliveTimeout after the last progress, want 1", aborts)
	}
}
