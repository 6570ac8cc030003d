package configdir

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/source/configdir/internal/yamlsubset"
)

// The shapes a document of a configuration file may have besides a single
// resource: a resources list, which may carry a DiscoveryResponse's fields;
// a bootstrap's static_resources; and, inside a list, a resource wrapped
// with a TTL.

// document is what a YAML or JSON document of a file holds.
type document struct {
	items   []any     // the resources, each as parseEntry takes it
	sel     *Selector // the nodes they go to; nil: every node
	typeURL string    // the type every resource must have; "": any
}

// responseFields are the fields of a DiscoveryResponse that a document
// with a resources list may also hold, as Envoy's files for filesystem
// subscriptions and xdsd's own --write-dir files do, each under its proto3
// JSON names; "type_url" is checked, the others are ignored (versions are
// the contents' hashes).
var responseFields = map[string]string{
	"version_info": "version_info", "versionInfo": "version_info",
	"type_url": "type_url", "typeUrl": "type_url",
	"nonce": "nonce",
}

// readDocument reads one document, named where for errors: a resources
// list, with a node selector or the fields of a DiscoveryResponse; a
// bootstrap's static_resources; or a single resource, whole. m is whole's
// keys and values (whole may be a *yamlsubset.Mapping). Its keys are looked
// at in order, so that the same bytes always give the same error.
func readDocument(where string, m map[string]any, whole any) (document, error) {
	var d document
	keys := slices.Sorted(maps.Keys(m))
	_, hasList := m["resources"]
	isList := hasList
	if _, typed := m["@type"]; !typed {
		for _, k := range keys {
			isList = isList || responseFields[k] != ""
		}
	}
	for _, k := range []string{"static_resources", "staticResources"} {
		if static, ok := m[k]; ok && !isList {
			return staticResources(where, k, m, yamlsubset.Plain(static))
		}
	}
	nodes, hasNodes := m["nodes"]
	if hasNodes && !isList {
		return d, errors.New("\"nodes\" needs a \"resources\" or \"static_resources\" list in the same document")
	}
	if !isList {
		d.items = []any{whole}
		return d, nil
	}
	given := map[string]string{} // field -> the name it was given under
	for _, k := range keys {
		switch field := responseFields[k]; {
		case k == "resources" || k == "nodes":
		case field == "":
			return d, fmt.Errorf("a document with \"resources\" may hold only \"nodes\" and a DiscoveryResponse's \"version_info\", \"type_url\" and \"nonce\" besides, not %q", k)
		case given[field] != "":
			return d, fmt.Errorf("%q and %q are the same field", given[field], k)
		default:
			given[field] = k
			if _, ok := m[k].(string); !ok {
				return d, fmt.Errorf("%q must be a string", k)
			}
		}
	}
	if k := given["type_url"]; k != "" {
		u := m[k].(string)
		if resource.Lookup(u) == nil {
			return d, fmt.Errorf("%s %q is not an xDS resource type", k, u)
		}
		d.typeURL = u
	}
	if hasNodes {
		sel, err := parseSelector(where, yamlsubset.Plain(nodes))
		if err != nil {
			return d, err
		}
		d.sel = sel
	}
	if list, ok := m["resources"]; ok {
		if d.items, ok = list.([]any); !ok {
			return d, errors.New("\"resources\" must be a list")
		}
	}
	return d, nil
}

// staticTypes are the type URLs of the lists of a bootstrap's
// static_resources.
var staticTypes = map[string]string{
	"listeners": resource.ListenerType, "clusters": resource.ClusterType, "secrets": resource.SecretType,
}

// staticResources reads a document that holds a bootstrap's
// static_resources, static, under key (its lists' entries are typed by the
// list they are in, taken in the order of the lists' names), and may hold
// "nodes" besides.
func staticResources(where, key string, m map[string]any, static any) (document, error) {
	var d document
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case key, "nodes":
		case "static_resources", "staticResources":
			return d, fmt.Errorf("%q and %q are the same field", key, k)
		default:
			return d, fmt.Errorf("a document with %q may hold only \"nodes\" besides, not %q (of a bootstrap, only static_resources is read)", key, k)
		}
	}
	if nodes, ok := m["nodes"]; ok {
		sel, err := parseSelector(where, yamlsubset.Plain(nodes))
		if err != nil {
			return d, err
		}
		d.sel = sel
	}
	lists, ok := static.(map[string]any)
	if !ok {
		return d, fmt.Errorf("%q must be a mapping", key)
	}
	for _, k := range slices.Sorted(maps.Keys(lists)) {
		url, known := staticTypes[k]
		if !known {
			return d, fmt.Errorf("%s: unknown field %q (listeners, clusters and secrets are read)", key, k)
		}
		list, ok := lists[k].([]any)
		if !ok {
			return d, fmt.Errorf("%s.%s must be a list", key, k)
		}
		for i, it := range list {
			r, ok := it.(map[string]any)
			if !ok {
				return d, fmt.Errorf("%s.%s[%d] must be a mapping", key, k, i)
			}
			if t, has := r["@type"]; has && t != url {
				return d, fmt.Errorf("%s.%s[%d]: @type %v is not %s", key, k, i, t, url)
			}
			typed := maps.Clone(r)
			typed["@type"] = url
			d.items = append(d.items, typed)
		}
	}
	return d, nil
}

// resourceWrapper is the type URL of Envoy's wrapper of a resource with a
// TTL (envoy.service.discovery.v3.Resource), which the resources of a
// DiscoveryResponse may be.
const resourceWrapper = "type.googleapis.com/envoy.service.discovery.v3.Resource"

// unwrap returns the resource inside m, a {ttl, resource} entry or, if
// envoy, Envoy's Resource wrapper (whose name, if given, must be the
// resource's, and whose version is ignored, as a response's is), with the
// name the wrapper gives and its TTL (0: none).
func unwrap(m map[string]any, envoy bool) (inner map[string]any, name string, ttl time.Duration, err error) {
	kind, fields := "a {ttl, resource} entry", "ttl and resource"
	if envoy {
		kind, fields = "an envoy.service.discovery.v3.Resource", "name, version, ttl and resource"
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "resource" && k != "ttl" && !(envoy && (k == "@type" || k == "name" || k == "version")) {
			return nil, "", 0, fmt.Errorf("unknown field %q in %s (only %s)", k, kind, fields)
		}
	}
	for _, k := range []string{"name", "version"} {
		switch v := m[k].(type) {
		case nil:
		case string:
			if k == "name" {
				name = v
			}
		default:
			return nil, "", 0, fmt.Errorf("%s: %v is not a string", k, v)
		}
	}
	if v, has := m["ttl"]; has {
		s, _ := v.(string)
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || !strings.HasSuffix(s, "s") {
			return nil, "", 0, fmt.Errorf("ttl: %v is not a positive proto3 JSON duration such as \"30s\"", v)
		}
		ttl = d
	}
	r, has := m["resource"]
	if !has {
		return nil, "", 0, fmt.Errorf("%s without a resource", kind)
	}
	if inner, _ = r.(map[string]any); inner == nil {
		return nil, "", 0, errors.New("resource: must be a mapping with \"@type\"")
	}
	return inner, name, ttl, nil
}
