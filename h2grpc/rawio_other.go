//go:build unix && !linux

package h2grpc

import "syscall"

// sysRead reads the non-blocking socket fd into b.
func sysRead(fd uintptr, b []byte) (int, error) { return syscall.Read(int(fd), b) }

// sysWrite writes b to the non-blocking socket fd.
func sysWrite(fd uintptr, b []byte) (int, error) { return syscall.Write(int(fd), b) }
