package h2grpc

import (
	"math/bits"
	"sync"
)

// Sizes of the buffers msgBufs holds: powers of two from 2^minMsgTier to
// 2^maxMsgTier bytes. A larger message gets a buffer of its own.
const (
	minMsgTier = 10
	maxMsgTier = 22
)

// msgBufs holds the buffers messages split across DATA frames are
// assembled in. Unlike grpc-go's default pool, it does not clear a buffer
// it hands out: assembleLocked writes a buffer whole before anything reads it,
// and clearing was most of the CPU of receiving large requests (an Envoy
// repeating its 33 KB node in every ACK: 4.2 s of 11.8).
var msgBufs msgPool

// msgPool is a mem.BufferPool of buffers that are not cleared, by powers
// of two. It is safe for concurrent use.
type msgPool struct {
	tiers [maxMsgTier - minMsgTier + 1]sync.Pool
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
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(t+minMsgTier))
	return &b
}

// Put gives back a buffer Get returned.
func (p *msgPool) Put(b *[]byte) {
	c := cap(*b)
	if t := msgTier(c); t >= 0 && c == 1<<(t+minMsgTier) {
		*b = (*b)[:c]
		p.tiers[t].Put(b)
	}
}
