//go:build !linux

package h2grpc_test

// corkSocket does nothing: TCP_CORK is Linux's (see cork_linux_test.go).
func corkSocket(uintptr) {}
