package configdir

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsd/xdsd/resource"
)

// Selector picks the nodes that see the resources of one document: a
// document with `nodes:` next to `resources:` serves them only to matching
// nodes. Every criterion given must hold; within a list, any entry may
// match:
//
//	nodes:
//	  ids: [edge-1, edge-2]     # node.id is one of these
//	  clusters: [edge]          # node.cluster is one of these
//	  metadata: {role: edge}    # node.metadata has these string fields
//	resources: [...]
type Selector struct {
	// ID identifies the selector: the file and the document's position.
	ID string
	// IDs, if not empty, are the node ids selected.
	IDs []string
	// Clusters, if not empty, are the node clusters selected.
	Clusters []string
	// Metadata are string fields a selected node's metadata has, each
	// with this value.
	Metadata map[string]string
}

// Matches reports whether a node is selected.
func (s *Selector) Matches(n *corev3.Node) bool {
	if len(s.IDs) > 0 && !slices.Contains(s.IDs, n.GetId()) {
		return false
	}
	if len(s.Clusters) > 0 && !slices.Contains(s.Clusters, n.GetCluster()) {
		return false
	}
	fields := n.GetMetadata().GetFields()
	for k, v := range s.Metadata {
		if fields[k].GetStringValue() != v {
			return false
		}
	}
	return true
}

// parseSelector reads a `nodes:` mapping.
func parseSelector(id string, v any) (*Selector, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("nodes: must be a mapping with ids, clusters or metadata")
	}
	s := &Selector{ID: id}
	strs := func(key string, v any) ([]string, error) {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("nodes.%s: must be a list of strings", key)
		}
		out := make([]string, 0, len(list))
		for _, x := range list {
			str, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("nodes.%s: must be a list of strings", key)
			}
			out = append(out, str)
		}
		return out, nil
	}
	var err error
	for k, v := range m {
		switch k {
		case "ids":
			s.IDs, err = strs(k, v)
		case "clusters":
			s.Clusters, err = strs(k, v)
		case "metadata":
			md, ok := v.(map[string]any)
			if !ok {
				return nil, errors.New("nodes.metadata: must be a mapping of strings")
			}
			s.Metadata = make(map[string]string, len(md))
			for mk, mv := range md {
				str, ok := mv.(string)
				if !ok {
					return nil, fmt.Errorf("nodes.metadata.%s: must be a string", mk)
				}
				s.Metadata[mk] = str
			}
		default:
			return nil, fmt.Errorf("nodes: unknown field %q (want ids, clusters or metadata)", k)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(s.IDs)+len(s.Clusters)+len(s.Metadata) == 0 {
		return nil, errors.New("nodes: selects nothing: give ids, clusters or metadata")
	}
	return s, nil
}

// GroupOf returns the node group of a node under a configuration: the IDs
// of the selectors it matches, joined; "" when it matches none (it then
// sees the resources that have no selector).
func (r *Result) GroupOf(n *corev3.Node) string {
	var ids []string
	for _, sc := range r.Scoped {
		if sc.Selector.Matches(n) {
			ids = append(ids, sc.Selector.ID)
		}
	}
	return strings.Join(ids, "\x00")
}

// DescribeGroup names the nodes of a group, for messages: those that no
// selector matches, or those that the selectors of the group's documents
// match.
func (r *Result) DescribeGroup(group string) string {
	if group == "" {
		return "the nodes no selector matches"
	}
	return "the nodes selected by " + strings.Join(strings.Split(group, "\x00"), " and by ")
}

// GroupResources returns what a group sees: the resources without a
// selector, then those of each of its selectors; when two selected
// documents define the same name, the one whose file sorts first wins.
func (r *Result) GroupResources(group string) []*resource.Resource {
	if group == "" || len(r.Scoped) == 0 {
		return r.Resources
	}
	ids := strings.Split(group, "\x00")
	out := append([]*resource.Resource(nil), r.Resources...)
	seen := make(map[key]bool)
	for _, sc := range r.Scoped {
		if !slices.Contains(ids, sc.Selector.ID) {
			continue
		}
		for _, res := range sc.Resources {
			k := key{res.Type, res.Name}
			if !seen[k] {
				seen[k] = true
				out = append(out, res)
			}
		}
	}
	return out
}

// Count returns the number of resources the configuration defines, with
// and without a selector.
func (r *Result) Count() int {
	n := len(r.Resources)
	for _, sc := range r.Scoped {
		n += len(sc.Resources)
	}
	return n
}

// Scoped is the resources of one document with a selector.
type Scoped struct {
	// Selector says which nodes are served Resources.
	Selector *Selector
	// Resources are the document's resources.
	Resources []*resource.Resource
}

// selectorKey describes the selectors: two configurations with the same
// key group nodes the same way.
func (r *Result) selectorKey() string {
	var parts []string
	for _, sc := range r.Scoped {
		parts = append(parts, fmt.Sprintf("%s|%v|%v|%v", sc.Selector.ID, sc.Selector.IDs, sc.Selector.Clusters, sortedMap(sc.Selector.Metadata)))
	}
	return strings.Join(parts, "\n")
}

func sortedMap(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
