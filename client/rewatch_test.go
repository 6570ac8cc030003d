package client_test

import (
	"errors"
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// TestRewatch: a watch cancelled and at once replaced by one of the same
// name. The server will not send what it believes the client holds, so the
// new watch must be told the client's state at once.
func TestRewatch(t *testing.T) {
	clienttest.ForEachVariant(t, func(t *testing.T, v clienttest.Variant) {
		for _, tc := range []struct{ short, typ, name string }{{"eds", eds, "a"}, {"cds", cds, "a"}, {"cds", cds, "*"}} {
			t.Run("replaced_watch_gets_the_held_resource/"+tc.short+"/"+tc.name, func(t *testing.T) {
				env := startServer(t)
				publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
				c := clienttest.NewClient(t, env.Addr, v, nil)
				r := clienttest.NewRecorder()
				cancel := c.Watch(tc.typ, tc.name, r)
				r.WantUpdate(t, "a")
				for range 3 {
					r2 := clienttest.NewRecorder()
					cancel()
					cancel = c.Watch(tc.typ, tc.name, r2)
					r2.WantUpdate(t, "a")
				}
				cancel()
			})
		}
	})
}

// TestWatchAfterClose: a Watch on a closed client, whose callback goroutine
// has ended, is still told of the error.
func TestWatchAfterClose(t *testing.T) {
	env := startServer(t)
	c := clienttest.NewClient(t, env.Addr, clienttest.Variants[0], nil)
	c.Close()
	r := clienttest.NewRecorder()
	cancel := c.Watch(eds, "a", r)
	defer cancel()
	e, ok := r.Poll()
	if !ok {
		t.Fatal("Watch on a closed client returned and reported nothing")
	}
	if e.Kind != "error" || !errors.Is(e.Err, client.ErrClosed) {
		t.Fatalf("got %s %q (%v), want error %v", e.Kind, e.Name, e.Err, client.ErrClosed)
	}
}
