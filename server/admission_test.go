package server_test

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
	"github.com/xdsd/xdsd/server"
)

// TestAdmission checks the bounds on streams (PROTOCOL R3: a storm of
// clients does not stall the server): one over a bound is refused at once
// with UNAVAILABLE, the streams taken in are served, and the refusals are
// counted.
func TestAdmission(t *testing.T) {
	open := func(t *testing.T, e *rawxds.Env) *rawxds.SotW {
		s := e.ADS(t)
		_ = s.TrySend(req(cds)) // a refused stream may have ended already: Err says how
		return s
	}
	refused := func(t *testing.T, e *rawxds.Env, reason string) string {
		var b bytes.Buffer
		e.Server.WritePrometheus(&b)
		for _, line := range strings.Split(b.String(), "\n") {
			if v, ok := strings.CutPrefix(line, `xdsd_streams_refused_total{reason="`+reason+`"} `); ok {
				return v
			}
		}
		t.Fatalf("no refusals counted for %s", reason)
		return ""
	}
	t.Run("R3_max_streams", func(t *testing.T) {
		c := cache.New(nil)
		c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("a")))
		e := rawxds.Start(t, c, server.Config{MaxStreams: 2})
		s1, s2 := open(t, e), open(t, e)
		s1.Recv()
		s2.Recv()
		s3 := open(t, e)
		if err := s3.Err(); status.Code(err) != codes.Unavailable {
			t.Fatalf("a third stream ended with %v, want UNAVAILABLE", err)
		}
		if n := refused(t, e, "max_streams"); n != "1" {
			t.Fatalf("%s refusals counted, want 1", n)
		}
		s1.Close()
		waitFor(t, func() bool { return e.Server.Streams() < 2 })
		open(t, e).Recv() // its place is free again
	})
	t.Run("R3_streams_per_second", func(t *testing.T) {
		c := cache.New(nil)
		c.SetSnapshot("", cache.MustSnapshot(rawxds.Cluster("a")))
		e := rawxds.Start(t, c, server.Config{StreamsPerSecond: 0.001, StreamBurst: 2})
		open(t, e).Recv()
		open(t, e).Recv()
		if err := open(t, e).Err(); status.Code(err) != codes.Unavailable {
			t.Fatalf("a stream over the rate ended with %v, want UNAVAILABLE", err)
		}
		if n := refused(t, e, "rate"); n != "1" {
			t.Fatalf("%s refusals counted, want 1", n)
		}
	})
}
