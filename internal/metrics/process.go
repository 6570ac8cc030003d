package metrics

import (
	"fmt"
	"io"
	"runtime/metrics"
	"time"
)

// started is when the process started, near enough: when this package was
// initialized.
var started = time.Now()

// runtimeSamples are the Go runtime's figures WriteProcess reports.
var runtimeSamples = []string{
	"/sched/goroutines:goroutines",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/total:bytes",
}

// WriteProcess writes the process's own metrics under the names
// Prometheus's Go client gives them, so that the usual dashboards and
// alerts apply: goroutines, heap in use and memory obtained from the
// system, the start time and, where the system tells (Linux), resident
// memory, CPU seconds and open file descriptors.
func WriteProcess(w io.Writer) {
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, name := range runtimeSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	gauge(w, "go_goroutines", "Number of goroutines that currently exist.", float64(s[0].Value.Uint64()))
	gauge(w, "go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", float64(s[1].Value.Uint64()+s[2].Value.Uint64()))
	gauge(w, "go_memstats_sys_bytes", "Number of bytes obtained from the system.", float64(s[3].Value.Uint64()))
	gauge(w, "process_start_time_seconds", "Start time of the process since the Unix epoch in seconds.", float64(started.UnixMilli())/1e3)
	if p, ok := readProcess(); ok {
		gauge(w, "process_resident_memory_bytes", "Resident memory size in bytes.", float64(p.rss))
		fmt.Fprintf(w, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", p.cpu.Seconds())
		gauge(w, "process_open_fds", "Number of open file descriptors.", float64(p.fds))
	}
}

// gauge writes one gauge without labels.
func gauge(w io.Writer, name, help string, v float64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
}

// process is what the system tells of the process.
type process struct {
	rss int64         // resident memory, bytes
	cpu time.Duration // user and system CPU time
	fds int           // open file descriptors
}
