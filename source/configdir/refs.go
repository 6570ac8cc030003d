package configdir

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xdsd/xdsd/resource"
)

// nameSets are the names references may point to: clusters, and endpoint
// resources.
type nameSets struct {
	clusters, endpoints map[string]bool
}

// CheckReferences checks what the loader checks across resources: that
// every route names a cluster of rs, and every EDS cluster has its
// endpoints resource in rs. It returns an *Error listing what does not
// hold (each Problem without File), or nil. A program that builds its
// snapshots in code (cache.NewSnapshot checks each resource, not these)
// can run it on a snapshot's resources, cache.Snapshot.All, before it
// publishes them.
func CheckReferences(rs ...*resource.Resource) error {
	all := make([]entry, len(rs))
	for i, r := range rs {
		all[i] = entry{res: r, index: i + 1}
	}
	refs := namesOf(all)
	var probs []Problem
	for _, e := range all {
		probs = append(probs, refs.problems(e)...)
	}
	if len(probs) > 0 {
		return &Error{Problems: probs}
	}
	return nil
}

func namesOf(all []entry) nameSets {
	n := nameSets{clusters: make(map[string]bool, len(all)/2), endpoints: make(map[string]bool, len(all)/2)}
	for _, e := range all {
		switch e.res.Type.URL {
		case resource.ClusterType:
			n.clusters[e.res.Name] = true
		case resource.EndpointType:
			n.endpoints[e.res.Name] = true
		}
	}
	return n
}

// problems rejects e if it is a route that names a cluster that does not
// exist, or an EDS cluster whose endpoints resource does not exist.
func (n nameSets) problems(e entry) []Problem {
	var probs []Problem
	switch m := e.res.Message.(type) {
	case *clusterv3.Cluster:
		if name, ok := resource.EDSName(m); ok && !n.endpoints[name] {
			probs = append(probs, Problem{File: e.file, Resource: label(e.res),
				Reason: fmt.Sprintf("eds_cluster_config: EDS cluster has no endpoints resource (a ClusterLoadAssignment with cluster_name %q)", name)})
		}
	case *routev3.RouteConfiguration:
		for i, vh := range m.GetVirtualHosts() {
			probs = append(probs, routeProblems(e, fmt.Sprintf("virtual_hosts[%d]", i), vh, n.clusters)...)
		}
	case *routev3.VirtualHost:
		probs = append(probs, routeProblems(e, "", m, n.clusters)...)
	}
	return probs
}

func routeProblems(e entry, prefix string, vh *routev3.VirtualHost, clusters map[string]bool) []Problem {
	var probs []Problem
	field := func(s string) string {
		if prefix == "" {
			return s
		}
		return prefix + "." + s
	}
	for i, r := range vh.GetRoutes() {
		a := r.GetRoute()
		if a == nil {
			continue
		}
		check := func(f, name string) {
			if name != "" && !clusters[name] {
				probs = append(probs, Problem{File: e.file, Resource: label(e.res),
					Reason: fmt.Sprintf("%s: route to cluster %q, which does not exist", field(f), name)})
			}
		}
		check(fmt.Sprintf("routes[%d].route.cluster", i), a.GetCluster())
		for j, wc := range a.GetWeightedClusters().GetClusters() {
			check(fmt.Sprintf("routes[%d].route.weighted_clusters.clusters[%d].name", i, j), wc.GetName())
		}
	}
	return probs
}
