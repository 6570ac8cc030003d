//go:build unix

package h2grpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection, closed when
// the test ends.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// socketWriterOf returns newWriter's writer of nc, failing the test unless
// it is a *socketWriter.
func socketWriterOf(t *testing.T, nc net.Conn) io.Writer {
	t.Helper()
	w := newWriter(nc, socketOf(nc), nil)
	if _, ok := w.(*socketWriter); !ok {
		t.Fatalf("newWriter(%T) = %T, want *socketWriter", nc, w)
	}
	return w
}

// TestSocketWriterWritesAllAsTheReaderReads writes far more than the
// socket's buffers hold (on Linux, loopback's grow to some 4 MiB for the
// sender and 6 MiB for the receiver): the write must wait for room, as
// often as it takes, and deliver every byte in order.
func TestSocketWriterWritesAllAsTheReaderReads(t *testing.T) {
	client, server := tcpPair(t)
	w := socketWriterOf(t, server)
	msg := make([]byte, 32<<20)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(msg); i += 8 {
		binary.LittleEndian.PutUint64(msg[i:], rnd.Uint64())
	}
	got := make([]byte, len(msg))
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(client, got)
		read <- err
	}()
	n, err := w.Write(msg)
	if err != nil || n != len(msg) {
		client.Close() // ends the reader
		<-read
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(msg))
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the reader got other bytes than were written")
	}
}

// TestSocketWriterFailsOnceThePeerResets: writes to a connection its peer
// reset fail, rather than report success or wait.
func TestSocketWriterFailsOnceThePeerResets(t *testing.T) {
	client, server := tcpPair(t)
	w := socketWriterOf(t, server)
	if err := client.SetLinger(0); err != nil { // close with RST
		t.Fatal(err)
	}
	client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := w.Write(make([]byte, 1<<10))
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes to a reset connection still succeed after 10 s")
		}
	}
}

// TestSocketWriterKeepsTheWriteDeadline: a write that waits for room ends
// at the connection's write deadline, as net.Conn's Write does.
func TestSocketWriterKeepsTheWriteDeadline(t *testing.T) {
	_, server := tcpPair(t) // the client never reads
	w := socketWriterOf(t, server)
	big := make([]byte, 64<<20) // made first: under -race on a busy host it took the whole deadline
	if err := server.SetWriteDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := w.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write = %d, %v; want os.ErrDeadlineExceeded", n, err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("Write wrote %d bytes before its deadline; want some, not all", n)
	}
}
