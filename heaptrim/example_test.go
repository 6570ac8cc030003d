package heaptrim_test

import (
	"context"
	"log/slog"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/heaptrim"
	"github.com/xdsd/xdsd/server"
)

// A program that embeds xdsd's server runs the trimmer beside it, once for
// the process, until it stops serving.
func ExampleRun() {
	ctx, stop := context.WithCancel(context.Background())
	srv := server.New(cache.New(nil), server.Config{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		heaptrim.Run(ctx, slog.Default(), srv)
	}()
	// ... register srv on a gRPC server and serve, until the program ends ...
	stop()
	<-done
	// Output:
}
