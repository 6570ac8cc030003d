package configdir

import (
	"fmt"
	"strings"
)

// aliasProblems finds the aliases (PROTOCOL D7: a VirtualHost's
// "<route config>/<domain>" names) of the resources a configuration keeps
// (all) that would name two resources of one node's view, or one resource
// twice: a snapshot cannot tell which a client means, so the configuration
// is rejected before it is built. Every node sees the common resources; a
// node a selector matches also sees that selector's documents. Selectors
// whose documents share an alias may well match different nodes, so each
// selector's resources are checked against the common ones only.
func aliasProblems(all []entry) []Problem {
	var probs []Problem
	common := make(map[key]entry)               // alias → the common resource it names
	scoped := make(map[*Selector]map[key]entry) // the same, of each selector's
	// The common resources first: a selector's are checked against all of
	// them, whichever file sorts first.
	ordered := make([]entry, 0, len(all))
	for _, scopedPass := range []bool{false, true} {
		for _, e := range all {
			if len(e.res.Aliases) > 0 && (e.sel != nil) == scopedPass {
				ordered = append(ordered, e)
			}
		}
	}
	for _, e := range ordered {
		owners := common
		if e.sel != nil {
			if owners = scoped[e.sel]; owners == nil {
				owners = make(map[key]entry)
				scoped[e.sel] = owners
			}
		}
		for _, a := range e.res.Aliases {
			k := key{e.res.Type, a}
			prev, dup := owners[k]
			if !dup && e.sel != nil {
				prev, dup = common[k]
			}
			if !dup {
				owners[k] = e
				continue
			}
			domain := a[strings.LastIndexByte(e.res.Name, '/')+1:]
			reason := fmt.Sprintf("domain %q is listed twice", domain)
			if prev.res != e.res {
				reason = fmt.Sprintf("domain %q is also a domain of %s in %s (resource #%d): a client asking for %q could mean either",
					domain, label(prev.res), prev.file, prev.index, a)
			}
			probs = append(probs, Problem{File: e.file, Resource: label(e.res), Reason: reason})
		}
	}
	return probs
}
