package examples_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	_ "github.com/xdsd/xdsd/internal/envoytypes" // the types of the Anys in the bootstraps
)

// readBootstrap parses an Envoy bootstrap YAML file as Envoy would, strictly
// (unknown fields are errors), and validates it.
func readBootstrap(t *testing.T, path string) *bootstrapv3.Bootstrap {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &b
}

// Every example bootstrap parses and validates.
func TestEnvoyBootstrapsValid(t *testing.T) {
	paths, err := filepath.Glob("envoy/bootstrap-*.yaml")
	if err != nil || len(paths) < 3 {
		t.Fatalf("bootstraps %q, %v", paths, err)
	}
	for _, p := range paths {
		readBootstrap(t, p)
	}
}

// The ADS bootstraps use xdsd on 127.0.0.1:18000 over the ADS variant their
// name says, and take listeners and clusters from that stream.
func TestEnvoyBootstrapsADS(t *testing.T) {
	for _, c := range []struct {
		file string
		api  corev3.ApiConfigSource_ApiType
	}{
		{"bootstrap-ads.yaml", corev3.ApiConfigSource_GRPC},
		{"bootstrap-delta.yaml", corev3.ApiConfigSource_DELTA_GRPC},
	} {
		t.Run(c.file, func(t *testing.T) {
			b := readBootstrap(t, filepath.Join("envoy", c.file))
			dr := b.GetDynamicResources()
			ads := dr.GetAdsConfig()
			if ads.GetApiType() != c.api || ads.GetTransportApiVersion() != corev3.ApiVersion_V3 || !ads.GetSetNodeOnFirstMessageOnly() {
				t.Errorf("ads_config %v", ads)
			}
			if n := len(ads.GetGrpcServices()); n != 1 || ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != "xds_cluster" {
				t.Errorf("ads_config grpc_services %v", ads.GetGrpcServices())
			}
			for what, cs := range map[string]*corev3.ConfigSource{"lds": dr.GetLdsConfig(), "cds": dr.GetCdsConfig()} {
				if cs.GetAds() == nil || cs.GetResourceApiVersion() != corev3.ApiVersion_V3 {
					t.Errorf("%s_config %v, want ads: {} and V3", what, cs)
				}
			}
			clusters := b.GetStaticResources().GetClusters()
			if len(clusters) != 1 || clusters[0].GetName() != "xds_cluster" {
				t.Fatalf("static clusters %v", clusters)
			}
			eps := clusters[0].GetLoadAssignment().GetEndpoints()
			if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
				t.Fatalf("xds_cluster endpoints %v", eps)
			}
			sa := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			if sa.GetAddress() != "127.0.0.1" || sa.GetPortValue() != 18000 {
				t.Errorf("xds_cluster endpoint %v, want 127.0.0.1:18000", sa)
			}
			if b.GetNode().GetId() == "" || b.GetAdmin().GetAddress().GetSocketAddress().GetPortValue() != 9901 {
				t.Errorf("node %v, admin %v", b.GetNode(), b.GetAdmin())
			}
		})
	}
}
