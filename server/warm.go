package server

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/xdsd/xdsd/resource"
)

// warmGate holds an ADS stream's listener and route updates until the client
// has requested, and been sent, the endpoints of the clusters it was just
// sent (PROTOCOL O1: "LDS after the CDS/EDS they use"). A client that never
// asks is waited for at most Config.WarmTimeout. Owned by the stream's
// goroutine.
type warmGate struct {
	wait  map[string]struct{} // ClusterLoadAssignment names still to be sent
	timer *time.Timer
}

// gated reports whether a type's upserts wait behind the gate: every type
// at or after listeners in the ADS order.
func gated(t *resource.Type) bool {
	return t.Order >= resource.Lookup(resource.ListenerType).Order
}

// arm adds the endpoints of the clusters just sent that the client does not
// hold yet. Only streams that use EDS are gated.
func (g *warmGate) arm(st *stream, sent []item) {
	eds := st.types[resource.Lookup(resource.EndpointType)]
	if eds == nil || !eds.active {
		return
	}
	for _, it := range sent {
		c, ok := it.res.Message.(*clusterv3.Cluster)
		if !ok {
			continue
		}
		if name, ok := resource.EDSName(c); ok && !g.satisfied(st, eds, name) {
			if g.wait == nil {
				g.wait = make(map[string]struct{})
			}
			g.wait[name] = struct{}{}
		}
	}
	if len(g.wait) > 0 && g.timer == nil {
		g.timer = time.NewTimer(st.srv.cfg.WarmTimeout)
	}
}

// satisfied reports whether the client holds the current endpoints name, or
// there are none to wait for.
func (g *warmGate) satisfied(st *stream, eds *typeState, name string) bool {
	cur := st.snap.Get(eds.t, name)
	if cur == nil {
		return true
	}
	held := eds.held[name]
	return held != nil && held.Version == cur.Version
}

// holds reports whether t's upserts must wait.
func (g *warmGate) holds(st *stream, t *resource.Type) bool {
	if len(g.wait) == 0 || !gated(t) {
		return false
	}
	eds := st.types[resource.Lookup(resource.EndpointType)]
	for name := range g.wait {
		if g.satisfied(st, eds, name) {
			delete(g.wait, name)
		}
	}
	if len(g.wait) == 0 {
		g.clear()
		return false
	}
	return true
}

// active reports whether the gate is waiting for anything.
func (g *warmGate) active() bool { return len(g.wait) > 0 }

// expired is signalled when the wait times out; nil when not waiting.
func (g *warmGate) expired() <-chan time.Time {
	if g.timer == nil {
		return nil
	}
	return g.timer.C
}

// clear opens the gate and stops its timer.
func (g *warmGate) clear() {
	g.wait = nil
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}
