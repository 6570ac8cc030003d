//go:build !linux

package main

import (
	"errors"
	"syscall"
)

// childAttr returns nil: without Linux's parent-death signal, servers under
// test are stopped only by this process.
func childAttr() *syscall.SysProcAttr { return nil }

// raiseNoFile is Linux only.
func raiseNoFile() (uint64, error) {
	return 0, errors.New("xdsbench: RLIMIT_NOFILE is raised on Linux only")
}
