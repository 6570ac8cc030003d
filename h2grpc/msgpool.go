package h2grpc

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
)

// Sizes of the buffers msgBufs holds: powers of two from 2^minMsgTier to
// 2^maxMsgTier bytes. A larger message gets a buffer of its own, which
// is garbage once the message is freed: what a client's large requests
// took goes back to the runtime when it goes, rather than wait in the
// pool, where it would look live.
const (
	minMsgTier = 10
	maxMsgTier = 16
)

// maxParkedMsgBytes bounds the bytes of the buffers msgBufs takes back
// between two garbage collections, less those it hands out again: past
// it, a buffer given back is dropped. A sync.Pool keeps what it was given
// until the second collection after, so the pool holds at most about
// twice this.
const maxParkedMsgBytes = 8 << 20

// msgBufs holds the buffers messages split across DATA frames are
// assembled in. Unlike grpc-go's default pool, it does not clear a buffer
// it hands out: assembleLocked writes a buffer whole before anything reads it,
// and clearing was most of the CPU of receiving large requests (an Envoy
// repeating its 33 KB node in every ACK).
var msgBufs msgPool

func init() { resetEachGC(&msgBufs.parked) }

// resetEachGC sets n to 0 at every garbage collection, from the next on.
func resetEachGC(n *atomic.Int64) {
	marker := new([2]*int) // holds pointers: not in a block of tiny objects, whose cleanup may never run
	runtime.AddCleanup(marker, func(n *atomic.Int64) {
		n.Store(0)
		resetEachGC(n)
	}, n)
}

// msgPool is a mem.BufferPool of buffers that are not cleared, by powers
// of two. It is safe for concurrent use.
type msgPool struct {
	tiers [maxMsgTier - minMsgTier + 1]sync.Pool
	// parked counts the bytes given back since the last collection, less
	// those handed out again: see maxParkedMsgBytes.
	parked atomic.Int64
}

// msgTier returns the index of the tier whose buffers hold n bytes, or -1.
func msgTier(n int) int {
	t := max(bits.Len(uint(n-1)), minMsgTier)
	if t > maxMsgTier {
		return -1
	}
	return t - minMsgTier
}

// Get returns a buffer of length n, its bytes left as they were.
func (p *msgPool) Get(n int) *[]byte {
	t := msgTier(n)
	if t < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		p.parked.Add(-int64(cap(*b)))
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(t+minMsgTier))
	return &b
}

// Put gives back a buffer Get returned.
func (p *msgPool) Put(b *[]byte) {
	c := cap(*b)
	t := msgTier(c)
	if t < 0 || c != 1<<(t+minMsgTier) {
		return
	}
	if p.parked.Add(int64(c)) > maxParkedMsgBytes {
		p.parked.Add(-int64(c))
		return
	}
	*b = (*b)[:c]
	p.tiers[t].Put(b)
}
