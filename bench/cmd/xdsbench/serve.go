package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/server"
)

// serveFlags are the flags shared by the serve-* subcommands.
type serveFlags struct {
	xdsAddr, controlAddr string
	clusters, endpoints  int
}

func (s *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.xdsAddr, "xds-addr", "127.0.0.1:0", "gRPC xDS listen address")
	fs.StringVar(&s.controlAddr, "control-addr", "127.0.0.1:0", "control HTTP listen address (POST /change, /debug/pprof/)")
	fs.IntVar(&s.clusters, "clusters", 1000, "number of clusters, each with one endpoint set")
	fs.IntVar(&s.endpoints, "endpoints", 4, "endpoints per endpoint set")
}

// changer applies a change: endpoint sets idx at generation gen.
type changer func(gen int, idx []int) error

// xdsServer is the gRPC server a server under test serves xDS on: grpc-go's
// (*grpc.Server) or xdsd's own transport (*h2grpc.Server).
type xdsServer interface {
	grpc.ServiceRegistrar
	Serve(net.Listener) error
	Stop()
}

// grpcGoServer returns grpc-go's server, with the options xdsd serve
// --grpc-transport grpc-go gives it (for every server: the codec only
// changes how xdsd's own responses are written).
func grpcGoServer() xdsServer { return grpc.NewServer(server.GRPCOptions()...) }

// serveUnderTest runs a server under test: register installs its xDS
// services on gs, and change is called, one call at a time, for each POST
// /change?gen=G&idx=I,J,... on the control address, which also serves
// /debug/pprof/. Once both listen it prints the ready line on stdout; it
// returns on SIGTERM or SIGINT.
func serveUnderTest(sf serveFlags, gs xdsServer, register func(grpc.ServiceRegistrar), change changer, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if _, err := raiseNoFile(); err != nil {
		fmt.Fprintln(stderr, "xdsbench:", err)
	}
	xdsLis, err := net.Listen("tcp", sf.xdsAddr)
	if err != nil {
		fmt.Fprintln(stderr, "xdsbench:", err)
		return 1
	}
	ctlLis, err := net.Listen("tcp", sf.controlAddr)
	if err != nil {
		xdsLis.Close()
		fmt.Fprintln(stderr, "xdsbench:", err)
		return 1
	}
	register(gs)

	var mu sync.Mutex // one change at a time
	mux := http.NewServeMux()
	mux.HandleFunc("POST /change", func(w http.ResponseWriter, r *http.Request) {
		gen, idx, err := parseChange(r, sf.clusters)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		err = change(gen, idx)
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Go(func() {
		if err := gs.Serve(xdsLis); err != nil {
			errc <- err
		}
	})
	wg.Go(func() {
		if err := hs.Serve(ctlLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	})
	fmt.Printf("%sxds=%s control=%s\n", readyPrefix, xdsLis.Addr(), ctlLis.Addr())

	code := 0
	select {
	case <-ctx.Done():
	case err := <-errc:
		fmt.Fprintln(stderr, "xdsbench:", err)
		code = 1
	}
	gs.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if hs.Shutdown(sctx) != nil {
		hs.Close()
	}
	wg.Wait()
	return code
}

// parseChange reads gen and idx from a control request.
func parseChange(r *http.Request, clusters int) (int, []int, error) {
	gen, err := strconv.Atoi(r.URL.Query().Get("gen"))
	if err != nil || gen < 0 {
		return 0, nil, fmt.Errorf("gen: want a generation >= 0")
	}
	var idx []int
	for s := range strings.SplitSeq(r.URL.Query().Get("idx"), ",") {
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 || i >= clusters {
			return 0, nil, fmt.Errorf("idx: %q is not a cluster index below %d", s, clusters)
		}
		idx = append(idx, i)
	}
	return gen, idx, nil
}
