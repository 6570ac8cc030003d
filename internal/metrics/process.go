package metrics

import (
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
	WriteSingle(w, "go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(s[0].Value.Uint64()))
	WriteSingle(w, "go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.", float64(s[1].Value.Uint64()+s[2].Value.Uint64()))
	WriteSingle(w, "go_memstats_sys_bytes", "gauge", "Number of bytes obtained from the system.", float64(s[3].Value.Uint64()))
	WriteSingle(w, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.", float64(started.UnixMilli())/1e3)
	if p, ok := readProcess(); ok {
		WriteSingle(w, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", float64(p.rss))
		WriteSingle(w, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", p.cpu.Seconds())
		WriteSingle(w, "process_open_fds", "gauge", "Number of open file descriptors.", float64(p.fds))
	}
}

// process is what the system tells of the process.
type process struct {
	rss int64         // resident memory, bytes
	cpu time.Duration // user and system CPU time
	fds int           // open file descriptors
}
