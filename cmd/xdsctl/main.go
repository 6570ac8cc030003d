// Command xdsctl is a command-line tool for operators of xDS control
// planes: it watches and fetches resources from any xDS server (xdsd,
// go-control-plane, Istio, ...), shows what each proxy connected to xdsd
// was sent and ACKed, dumps a node's configuration, and validates a
// configuration directory offline. Run `xdsctl --help` for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/xdsd/xdsd/internal/app/xdsctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := xdsctl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
