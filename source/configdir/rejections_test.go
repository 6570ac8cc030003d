package configdir_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/xdsd/xdsd/internal/testutil/golden"
	"github.com/xdsd/xdsd/source/configdir"
)

// rejected are configurations, each a set of files, that the loader
// refuses; testdata/rejections.golden holds what it says of each.
var rejected = []struct {
	name  string
	files map[string]string
}{
	{"unknown_field", map[string]string{"c.yaml": `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: a
  type: STATIC
  no_such_field: 1
`}},
	{"wrong_kind_of_value", map[string]string{"c.yaml": `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: a
  connect_timeout: soon
`}},
	{"validation", map[string]string{"c.yaml": `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: ""
`}},
	{"unknown_type", map[string]string{"c.yaml": `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.NoSuchThing
  name: a
`}},
	{"missing_type", map[string]string{"c.yaml": `resources:
- name: a
`}},
	{"invalid_yaml", map[string]string{"c.yaml": "resources: [a, b\n"}},
	{"duplicate_names", map[string]string{
		"a.yaml": "resources:\n- {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, type: STATIC}\n",
		"b.yaml": "resources:\n- {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, type: STATIC}\n",
	}},
	{"eds_cluster_without_endpoints", map[string]string{"c.yaml": `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: a
  type: EDS
  eds_cluster_config: {eds_config: {ads: {}}}
`}},
	{"route_to_a_missing_cluster", map[string]string{"r.yaml": `resources:
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: r
  virtual_hosts:
  - name: v
    domains: ["*"]
    routes:
    - match: {prefix: /}
      route: {cluster: nowhere}
`}},
	{"secret_key_not_quoted", map[string]string{"s.yaml": `resources:
- "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
  name: s
  tls_certificate:
    private_key: {inline_bytes: "-----BEGIN PRIVATE KEY-----not base64-----END PRIVATE KEY-----"}
`}},
}

// TestRejectionMessages: what the loader says of each configuration of
// rejected, which names the file, the resource, the field and the reason,
// is testdata/rejections.golden's (-update rewrites it).
func TestRejectionMessages(t *testing.T) {
	var b strings.Builder
	for _, tc := range rejected {
		fsys := fstest.MapFS{}
		for path, data := range tc.files {
			fsys[path] = &fstest.MapFile{Data: []byte(data), Mode: 0o444}
		}
		_, err := configdir.NewFSLoader(fsys, "the "+tc.name+" directory").Load()
		if _, ok := errors.AsType[*configdir.Error](err); !ok {
			t.Errorf("%s: Load = %v, want a *configdir.Error", tc.name, err)
			continue
		}
		b.WriteString("== " + tc.name + "\n" + err.Error() + "\n")
	}
	golden.Check(t, filepath.Join("testdata", "rejections.golden"), b.String())
}

// FuzzParseFile: ParseFile takes any file without panicking, and what it
// accepts has a name and passes its type's validation.
func FuzzParseFile(f *testing.F) {
	for _, tc := range rejected {
		for path, data := range tc.files {
			f.Add(path, []byte(data))
		}
	}
	f.Add("c.yaml", []byte("resources:\n- {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: a, type: STATIC}\n"))
	f.Add("c.json", []byte(`{"resources": [{"@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", "cluster_name": "a"}]}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if !strings.HasSuffix(name, ".json") {
			name = "f.yaml"
		}
		rs, err := configdir.ParseFile(name, data)
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.Name == "" {
				t.Fatalf("accepted a %s without a name", r.Type.Short)
			}
			if v, ok := r.Message.(interface{ Validate() error }); ok {
				if err := v.Validate(); err != nil {
					t.Fatalf("accepted %s %q, which does not validate: %v", r.Type.Short, r.Name, err)
				}
			}
		}
	})
}
