package cache

import (
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

// GroupFunc maps a node to the name of the group whose snapshot it is served
// (PROTOCOL N1). It must be fast and must not block. The server passes it
// the node without its extensions list, which it does not keep, decoded
// from the encoding its stream keeps.
type GroupFunc func(*corev3.Node) string

// DefaultGroup puts every node in one group, named "".
func DefaultGroup(*corev3.Node) string { return "" }

// BuildFunc builds the snapshot of a group that has none yet, when a node
// of that group first appears. It returns nil if it cannot. It runs with
// the cache's lock held, so it must not call the cache, and every
// publication waits for it. With a builder set, the cache forgets a group
// (other than "") once no node uses it, the snapshot published for it
// included: the builder builds it again when a node of the group comes
// back, so it must build the group's current configuration.
type BuildFunc func(group string) *Snapshot

// Cache holds one snapshot per node group and the watchers of each group.
//
// Locking: pub orders publications (SetSnapshot, Update) and is taken
// before mu, which guards the fields below it; Update calls its function
// with pub held and mu not.
type Cache struct {
	pub     sync.Mutex
	mu      sync.Mutex
	groupOf GroupFunc // nil: DefaultGroup, without looking at nodes
	build   BuildFunc // nil: groups get snapshots only from SetSnapshot
	groups  map[string]*group
}

type group struct {
	snap     *Snapshot
	watchers map[*Watcher]struct{}
}

// New returns an empty cache. A nil groupOf means DefaultGroup. groupOf is
// called with the cache's lock held: it must not call the cache.
func New(groupOf GroupFunc) *Cache {
	return &Cache{groupOf: groupOf, groups: make(map[string]*group)}
}

// GroupOf returns the group name of a node.
func (c *Cache) GroupOf(n *corev3.Node) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groupOf == nil {
		return ""
	}
	return c.groupOf(n)
}

// groupOfLocked returns w's group under the grouping in force. A watcher
// of an encoded node has it decoded here, if watchEncoded did not, the
// first time a grouping other than the default asks; it keeps it while
// there is such a grouping.
func (c *Cache) groupOfLocked(w *Watcher) string { return groupWith(c.groupOf, w) }

// groupWith is groupOfLocked under groupOf rather than the grouping in
// force. Call it with the cache's lock held.
func groupWith(groupOf GroupFunc, w *Watcher) string {
	if groupOf == nil {
		if w.raw != nil {
			w.node = nil // decoded again if a grouping needs it
		}
		return ""
	}
	if w.node == nil && w.raw != nil {
		w.node = decodeNode(w.raw)
	}
	return groupOf(w.node)
}

// decodeNode decodes the encoding of a node that watchEncoded's caller
// checked.
func decodeNode(raw []byte) *corev3.Node {
	n := new(corev3.Node)
	_ = proto.Unmarshal(raw, n)
	return n
}

// SetGrouping replaces the node → group function and the builder of
// missing group snapshots, then moves every watcher whose node now belongs
// to another group there (a moved stream re-evaluates everything). With a
// builder, it forgets the groups that no watcher uses (see BuildFunc);
// without one, every published snapshot is kept. Call it when the rules
// that decide groups change; a nil groupOf means DefaultGroup, without a
// look at the nodes (those that xdsd's server keeps encoded are then not
// decoded). To change the grouping and the snapshots together, use
// Publish.
func (c *Cache) SetGrouping(groupOf GroupFunc, build BuildFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groupOf, c.build = groupOf, build
	var moves []move
	for name, g := range c.groups {
		for w := range g.watchers {
			if next := c.groupOfLocked(w); next != name {
				moves = append(moves, move{w, g, next})
			}
		}
	}
	c.moveAllLocked(moves)
}

// move is a watcher's move from one group to another.
type move struct {
	w    *Watcher
	from *group
	to   string
}

// moveAllLocked moves each watcher to its new group (built if need be),
// which it is to re-evaluate whole, then forgets the groups that no
// watcher uses (see forgettableLocked).
func (c *Cache) moveAllLocked(moves []move) {
	for _, m := range moves {
		delete(m.from.watchers, m.w)
		ng := c.builtGroupLocked(m.to)
		ng.watchers[m.w] = struct{}{}
		m.w.group = m.to
		m.w.notifyAllLocked(ng.snap)
	}
	for name, g := range c.groups {
		if c.forgettableLocked(name, g) {
			delete(c.groups, name)
		}
	}
}

// forgettableLocked says whether group g, named name, may be forgotten:
// no watcher uses it, and it has no snapshot or the builder can build it
// again.
func (c *Cache) forgettableLocked(name string, g *group) bool {
	return len(g.watchers) == 0 && name != "" && (g.snap == nil || c.build != nil)
}

// groupLocked returns the named group, creating it.
func (c *Cache) groupLocked(name string) *group {
	g := c.groups[name]
	if g == nil {
		g = &group{watchers: make(map[*Watcher]struct{})}
		c.groups[name] = g
	}
	return g
}

// builtGroupLocked is groupLocked that also builds the group's snapshot if
// it has none and a builder is set: for a node's first appearance, never
// for a publication (whose diff must be against what was served).
func (c *Cache) builtGroupLocked(name string) *group {
	g := c.groupLocked(name)
	if g.snap == nil && c.build != nil {
		g.snap = c.build(name)
		if g.snap != nil {
			for w := range g.watchers {
				w.notifyAllLocked(g.snap) // they were waiting for a first snapshot
			}
		}
	}
	return g
}

// SetSnapshot publishes s to every node of the group: each stream
// evaluates its types against s as a whole, never against part of s and
// part of an older snapshot. On ADS a change still reaches the client in
// several responses, in the order of make-before-break (see the server
// package): updates first, type by type, then removals, so a SotW
// Listener or Cluster response may still list resources that s removed,
// until the response that removes them. It wakes only watchers of that
// group and never blocks on them. It returns what changed.
//
// A nil s forgets the group's snapshot: its streams keep what they were
// sent and are sent nothing more until a snapshot is set again. A stream
// whose group has no snapshot (and no builder to make one) waits for one,
// unanswered. To change a few resources of the current snapshot from
// several goroutines, use Update, which orders read and write.
func (c *Cache) SetSnapshot(groupName string, s *Snapshot) Changes {
	c.pub.Lock()
	defer c.pub.Unlock()
	return c.setSnapshot(groupName, s)
}

// Update publishes f's snapshot made from the group's current one (nil if
// it has none), as SetSnapshot does; f runs while no other SetSnapshot or
// Update of the cache can, so that changes made from several goroutines
// are none of them lost. If f returns an error, nothing is published and
// Update returns it. f must not call SetSnapshot or Update.
//
//	c.Update("", func(cur *cache.Snapshot) (*cache.Snapshot, error) {
//		return cur.With(cluster) // or cur.Without(t, names...), nil
//	})
func (c *Cache) Update(groupName string, f func(current *Snapshot) (*Snapshot, error)) (Changes, error) {
	c.pub.Lock()
	defer c.pub.Unlock()
	next, err := f(c.Snapshot(groupName))
	if err != nil {
		return nil, err
	}
	return c.setSnapshot(groupName, next), nil
}

func (c *Cache) setSnapshot(groupName string, s *Snapshot) Changes {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groupLocked(groupName)
	ch := s.Diff(g.snap)
	g.snap = s
	if len(ch) == 0 {
		return ch
	}
	now := time.Now()
	for w := range g.watchers {
		w.notifyLocked(s, ch, now)
	}
	return ch
}

// Snapshot returns the group's current snapshot (built if need be), or
// nil if it has none.
func (c *Cache) Snapshot(groupName string) *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[groupName]; g != nil && g.snap != nil {
		return g.snap
	}
	if c.build != nil {
		return c.builtGroupLocked(groupName).snap
	}
	return nil
}

// Groups returns the names of groups that have a snapshot.
func (c *Cache) Groups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n, g := range c.groups {
		if g.snap != nil {
			out = append(out, n)
		}
	}
	return out
}

// Watch registers a watcher on the node's group. The watcher starts with the
// group's current snapshot (if any) and nothing pending: its first Take
// reports no change, and a new stream evaluates every type itself. Call
// Close when done.
func (c *Cache) Watch(n *corev3.Node) *Watcher {
	w := &Watcher{kick: make(chan struct{}, 1)}
	if c.watch(w, n) {
		w.kick <- struct{}{}
	}
	return w
}

// WatchFunc is Watch with a callback instead of Kick: onChange is called
// when a new snapshot arrives or the node moves to another group. It is
// called with the cache's lock held and must not block or call into the
// cache. It is not called for the snapshot the group has when WatchFunc
// returns: Take that one at once.
func (c *Cache) WatchFunc(n *corev3.Node, onChange func()) *Watcher {
	w := &Watcher{onChange: onChange}
	c.watch(w, n)
	return w
}

// WatchEncoded is WatchFunc for a node given by its protobuf encoding,
// which must decode (the caller checks that) and is kept as it is: the
// caller must not change it. The node is decoded only when a grouping
// other than the default asks, so that the watchers of a server with no
// grouping keep a few hundred bytes each rather than a decoded node of
// some dozens of allocations.
func (c *Cache) WatchEncoded(node []byte, onChange func()) *Watcher {
	w := &Watcher{onChange: onChange, raw: node}
	c.mu.Lock()
	grouped := c.groupOf != nil
	c.mu.Unlock()
	var n *corev3.Node
	if grouped { // decoded now rather than under the lock
		n = decodeNode(node)
	}
	c.watch(w, n)
	return w
}

// watch registers w for n's group (w.raw's if n is nil and w.raw is set)
// and reports whether the group already has a snapshot.
func (c *Cache) watch(w *Watcher, n *corev3.Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.cache, w.node = c, n
	w.group = c.groupOfLocked(w)
	g := c.builtGroupLocked(w.group)
	g.watchers[w] = struct{}{}
	w.snap = g.snap
	w.news.Store(g.snap != nil)
	return g.snap != nil
}

func (c *Cache) unwatch(w *Watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[w.group]; g != nil {
		delete(g.watchers, w)
		if c.forgettableLocked(w.group, g) {
			delete(c.groups, w.group) // rebuilt on demand
		}
	}
}
