package client_test

import (
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// TestLegacyWildcardOnlyWhereEmptyMeansAll checks that LegacyWildcard
// sends the empty list only for a type whose empty subscription is the
// wildcard (clusters), and "*" for the others (endpoints), for which an
// empty list would ask for nothing: the client gets every resource of both.
func TestLegacyWildcardOnlyWhereEmptyMeansAll(t *testing.T) {
	for _, v := range variants {
		if v.delta {
			continue // LegacyWildcard is SotW's
		}
		t.Run(v.name, func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
			tp := &tap{}
			c := newClient(t, env.Addr, v, func(c *client.Config) {
				c.Transport = tp
				c.LegacyWildcard = true
			})
			rc, re := newRecorder(), newRecorder()
			defer c.Watch(cds, "*", rc)()
			defer c.Watch(eds, "*", re)()
			rc.wantUpdate(t, "a")
			re.wantUpdate(t, "a")
			want := map[string][]string{cds: nil, eds: {"*"}}
			for _, w := range tp.messages(func(w wire) bool { return w.sent }) {
				r := w.msg.(*discovery.DiscoveryRequest)
				if names, ok := want[r.GetTypeUrl()]; ok && !slices.Equal(r.GetResourceNames(), names) {
					t.Errorf("%s request names %q, want %q", r.GetTypeUrl(), r.GetResourceNames(), names)
				}
			}
		})
	}
}

// TestLegacyWildcardGivenUp: with the legacy wildcard, an empty list
// stays the wildcard until a request names something; the client giving
// it up sends "*" and then the empty list, and the server stops.
func TestLegacyWildcardGivenUp(t *testing.T) {
	for _, v := range variants {
		if v.delta {
			continue
		}
		t.Run("S8_"+v.name, func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"))
			tp := &tap{}
			c := newClient(t, env.Addr, v, func(c *client.Config) {
				c.Transport = tp
				c.LegacyWildcard = true
			})
			rc := newRecorder()
			cancel := c.Watch(cds, "*", rc)
			rc.wantUpdate(t, "a")
			cancel()
			var got [][]string
			eventually(t, "the legacy wildcard given up with [*] then []", func() bool {
				got = nil
				for _, w := range tp.messages(func(w wire) bool { return w.sent }) {
					if r := w.msg.(*discovery.DiscoveryRequest); r.GetTypeUrl() == cds {
						got = append(got, r.GetResourceNames())
					}
				}
				n := len(got)
				return n >= 3 && len(got[n-1]) == 0 && slices.Equal(got[n-2], []string{"*"})
			})
			if len(got[0]) != 0 {
				t.Errorf("first cds request %q, want the legacy wildcard", got[0])
			}
		})
	}
}
