//go:build !linux

package metrics

// readProcess reports nothing: only Linux's /proc is read.
func readProcess() (process, bool) { return process{}, false }
