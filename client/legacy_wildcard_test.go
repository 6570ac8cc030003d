package client_test

import (
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/clienttest"
	"github.com/xdsd/xdsd/internal/testutil/rawxds"
)

// TestLegacyWildcardOnlyWhereEmptyMeansAll checks that LegacyWildcard
// sends the empty list only for a type whose empty subscription is the
// wildcard (clusters), and "*" for the others (endpoints), for which an
// empty list would ask for nothing: the client gets every resource of both.
func TestLegacyWildcardOnlyWhereEmptyMeansAll(t *testing.T) {
	for _, v := range clienttest.Variants {
		if v.Delta {
			continue // LegacyWildcard is SotW's
		}
		t.Run(v.Name, func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"), rawxds.Endpoints("a", 1))
			tp := &clienttest.Tap{}
			c := clienttest.NewClient(t, env.Addr, v, func(c *client.Config) {
				c.Transport = tp
				c.LegacyWildcard = true
			})
			rc, re := clienttest.NewRecorder(), clienttest.NewRecorder()
			defer c.Watch(cds, "*", rc)()
			defer c.Watch(eds, "*", re)()
			rc.WantUpdate(t, "a")
			re.WantUpdate(t, "a")
			want := map[string][]string{cds: nil, eds: {"*"}}
			for _, w := range tp.Messages(func(w clienttest.Wire) bool { return w.Sent }) {
				r := w.Msg.(*discovery.DiscoveryRequest)
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
	for _, v := range clienttest.Variants {
		if v.Delta {
			continue
		}
		t.Run("S8_"+v.Name, func(t *testing.T) {
			env := startServer(t)
			publish(env, rawxds.Cluster("a"))
			tp := &clienttest.Tap{}
			c := clienttest.NewClient(t, env.Addr, v, func(c *client.Config) {
				c.Transport = tp
				c.LegacyWildcard = true
			})
			rc := clienttest.NewRecorder()
			cancel := c.Watch(cds, "*", rc)
			rc.WantUpdate(t, "a")
			cancel()
			var got [][]string
			clienttest.Eventually(t, "the legacy wildcard given up with [*] then []", func() bool {
				got = nil
				for _, w := range tp.Messages(func(w clienttest.Wire) bool { return w.Sent }) {
					if r := w.Msg.(*discovery.DiscoveryRequest); r.GetTypeUrl() == cds {
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
