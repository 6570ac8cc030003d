package h2grpc

import "testing"

// TestMsgPool checks the sizes msgBufs hands out and takes back.
func TestMsgPool(t *testing.T) {
	var p msgPool
	for _, n := range []int{1, 1023, 1024, 1025, 33 << 10, 1 << 22, 1<<22 + 1, 10 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		want := n
		if n <= 1<<maxMsgTier {
			want = 1 << max(minMsgTier, msgTierBits(n))
		}
		if cap(*b) != want {
			t.Errorf("Get(%d): capacity %d, want %d", n, cap(*b), want)
		}
		(*b)[n-1] = 7
		p.Put(b)
	}
	// A buffer given back comes back at the length asked, its bytes not
	// cleared. (sync.Pool may drop what it is given, under -race a quarter
	// of it: so try a few times.)
	reused := false
	for i := 0; i < 20 && !reused; i++ {
		b := p.Get(5000)
		(*b)[0] = byte(i + 1)
		p.Put(b)
		c := p.Get(6000)
		reused = len(*c) == 6000 && (*c)[0] == byte(i+1)
		p.Put(c)
	}
	if !reused {
		t.Error("no buffer was reused, or it was cleared")
	}
	// One of a size no tier holds is dropped.
	odd := make([]byte, 3000)
	p.Put(&odd)
	if c := p.Get(3000); cap(*c) != 4096 {
		t.Errorf("a buffer of capacity 3000 was taken back: got capacity %d", cap(*c))
	}
}

// msgTierBits is the power of two a tier of n bytes holds.
func msgTierBits(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}
