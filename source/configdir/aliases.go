package configdir

import (
	"fmt"
	"strings"
)

// aliasChecker finds the aliases (PROTOCOL D7: a VirtualHost's
// "<route config>/<domain>" names) that would name two resources of one
// node's view, or one resource twice: a snapshot cannot tell which a
// client means, so the configuration is rejected before it is built.
// Every node sees the common resources; a node a selector matches also
// sees that selector's documents. Selectors whose documents share an
// alias may well match different nodes, so only each selector's own
// resources are checked against the common ones, not against one
// another's.
type aliasChecker struct {
	common map[key]entry // alias → the common resource it names
	probs  []Problem
}

// addCommon checks and records the aliases of resources every node sees.
func (c *aliasChecker) addCommon(es []entry) {
	c.common = make(map[key]entry)
	for _, e := range es {
		c.add(c.common, nil, e)
	}
}

// checkScoped checks one selector's resources, with the common ones.
func (c *aliasChecker) checkScoped(es []entry) {
	own := make(map[key]entry)
	for _, e := range es {
		c.add(own, c.common, e)
	}
}

// add records e's aliases in owners, and a problem for each that owners
// or also already holds.
func (c *aliasChecker) add(owners, also map[key]entry, e entry) {
	for _, a := range e.res.Aliases {
		k := key{e.res.Type, a}
		prev, dup := owners[k]
		if !dup {
			prev, dup = also[k]
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
		c.probs = append(c.probs, Problem{File: e.file, Resource: label(e.res), Reason: reason})
	}
}

// aliasProblems checks the aliases of the resources a configuration
// keeps (all: the common ones, then each selector's, in file order).
func aliasProblems(all []entry) []Problem {
	var common []entry
	var order []*Selector
	scoped := make(map[*Selector][]entry)
	for _, e := range all {
		if len(e.res.Aliases) == 0 {
			continue
		}
		if e.sel == nil {
			common = append(common, e)
			continue
		}
		if _, ok := scoped[e.sel]; !ok {
			order = append(order, e.sel)
		}
		scoped[e.sel] = append(scoped[e.sel], e)
	}
	var c aliasChecker
	c.addCommon(common)
	for _, sel := range order {
		c.checkScoped(scoped[sel])
	}
	return c.probs
}
