package configdir_test

import (
	"testing"
	"testing/fstest"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xdsd/xdsd/source/configdir"
)

// TestOffer: a load takes a file parsed ahead only if the file holds the
// bytes that were parsed, and drops the offers it does not take.
func TestOffer(t *testing.T) {
	files := fstest.MapFS{}
	loader := configdir.NewFSLoader(files, "files")
	at := time.Unix(1, 0)
	put := func(rel string, data string) {
		at = at.Add(time.Second) // a new stamp: the file is read again
		files[rel] = &fstest.MapFile{Data: []byte(data), ModTime: at, Mode: 0o444}
	}
	load := func(wantPort uint32, wantPrepared int) {
		t.Helper()
		res, err := loader.Load()
		if err != nil {
			t.Fatal(err)
		}
		if res.Prepared != wantPrepared {
			t.Errorf("%d files taken as parsed ahead, want %d", res.Prepared, wantPrepared)
		}
		for _, r := range res.Resources {
			if cla, ok := r.Message.(*endpointv3.ClusterLoadAssignment); ok {
				if got := cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue(); got != wantPort {
					t.Errorf("endpoints on port %d, want %d", got, wantPort)
				}
			}
		}
	}
	put("a.yaml", clusterYAML("a", 1))
	load(1, 0)

	put("a.yaml", clusterYAML("a", 2))
	loader.Offer("a.yaml", configdir.Prepare("a.yaml", []byte(clusterYAML("a", 2))))
	load(2, 1)

	put("a.yaml", clusterYAML("a", 3))
	loader.Offer("a.yaml", configdir.Prepare("a.yaml", []byte(clusterYAML("a", 4)))) // not what the file holds
	load(3, 0)

	loader.Offer("a.yaml", configdir.Prepare("a.yaml", []byte(clusterYAML("a", 5))))
	load(3, 0) // the file unchanged, not read: the offer is dropped
	put("a.yaml", clusterYAML("a", 5))
	load(5, 0)
}
