package resource_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTypeTable: the table's orders are a permutation of 0..NumTypes-1
// each, and only clusters re-warm, with their endpoints.
func TestTypeTable(t *testing.T) {
	types := resource.Types()
	if len(types) != resource.NumTypes {
		t.Fatalf("%d types, NumTypes is %d", len(types), resource.NumTypes)
	}
	var order, removal [resource.NumTypes]bool
	for _, typ := range types {
		if order[typ.Order] || removal[typ.RemovalOrder] {
			t.Fatalf("%s: an Order or RemovalOrder another type has", typ)
		}
		order[typ.Order], removal[typ.RemovalOrder] = true, true
		want := (*resource.Type)(nil)
		if typ.URL == resource.ClusterType {
			want = resource.Lookup(resource.EndpointType)
		}
		if typ.Rewarms != want {
			t.Errorf("%s re-warms %v, want %v", typ, typ.Rewarms, want)
		}
	}
}
