// Package stacks lists the running goroutines' stacks, for tests that look
// for a goroutine in some function.
package stacks

import (
	"runtime"
	"strings"
)

// All returns the stack of every goroutine, one string each.
func All() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// In returns the stacks of the goroutines whose stack contains s (a
// function's name, say).
func In(s string) []string {
	var out []string
	for _, g := range All() {
		if strings.Contains(g, s) {
			out = append(out, g)
		}
	}
	return out
}
