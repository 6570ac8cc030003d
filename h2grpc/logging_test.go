package h2grpc_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdsd/xdsd/h2grpc"
)

// records is a slog.Handler that keeps the records of Info and above.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *records) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *records) WithGroup(string) slog.Handler                { return h }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// warnings returns the Warn records so far, each as its message and
// attributes.
func (h *records) warnings() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.recs {
		if r.Level != slog.LevelWarn {
			continue
		}
		m := map[string]string{"msg": r.Message}
		r.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.String()
			return true
		})
		out = append(out, m)
	}
	return out
}

// TestViolationsLoggedAtWarn: a client disconnected for breaking the
// protocol is logged at Warn, once, with its address and why; one that
// closes its connection is not; and clients breaking it on many
// connections get no more than a burst of lines (see also TestLogLimit).
func TestViolationsLoggedAtWarn(t *testing.T) {
	h := &records{}
	s, _, addr := start(t, h2grpc.Options{Logger: slog.New(h)})
	// The server logs a connection's end before it closes it.
	violate := func() string {
		nc, fr := dialFramer(t, addr)
		fr.WriteWindowUpdate(9, 1) // on an idle stream: PROTOCOL_ERROR
		io.Copy(io.Discard, nc)    // until the server closes it
		return nc.LocalAddr().String()
	}
	peer := violate()
	nc, _ := dialFramer(t, addr)
	nc.Close()
	waitUntil(t, func() (bool, string) {
		n := h2grpc.OpenConns(s)
		return n == 0, fmt.Sprintf("%d connections still open", n)
	})
	warned := h.warnings()
	if len(warned) != 1 || warned[0]["peer"] != peer || !strings.Contains(warned[0]["error"], "PROTOCOL_ERROR") {
		t.Fatalf("logged at Warn: %v; want one line, for peer %s, with PROTOCOL_ERROR", warned, peer)
	}
	const more = 3 * 10
	began := time.Now()
	for range more {
		violate()
	}
	warned = h.warnings()
	// A burst of 10, and one a second from then on.
	if max := 10 + int(time.Since(began)/time.Second) + 1; len(warned) > max {
		t.Fatalf("%d violating connections logged %d lines at Warn, want at most %d", 1+more, len(warned), max)
	}
}
