package server

import (
	"testing"

	"github.com/xdsd/xdsd/resource"
)

// What a delta client stops naming while a response is in flight is kept
// as maybe held only until that response is answered: a client without a
// wildcard did not take it in, and a maybe-held entry keeps the stream off
// the shared lists (see keyList.share).
func TestDeltaDroppedUntilTheResponseIsAnswered(t *testing.T) {
	for _, nack := range []bool{false, true} {
		in := fuzzHeader(0, 0x0003, 0).
			deltaReq(resource.ClusterType, 0, fuzzNodeFlag, []string{"c0", "c1"}, nil).
			deltaReq(resource.ClusterType, 0, 0, nil, []string{"c0"})
		fc := newFuzzClient(t, []byte(in), true)
		fc.step()
		fc.step()
		ts := fc.st.types.get(cdsType)
		if ts.nDropped != 1 || !ts.waiting {
			t.Fatalf("after the unsubscribe: %d maybe held, waiting %v; want 1, true", ts.nDropped, ts.waiting)
		}
		fc.reply(0, nack)
		if ts.nDropped != 0 || ts.lookup("c0") != nil {
			t.Fatalf("after the reply (nack %v): %d maybe held, c0's entry %v; want none", nack, ts.nDropped, ts.lookup("c0"))
		}
		fc.st.close()
	}
}
