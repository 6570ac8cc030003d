// Package metrics holds what xdsd's Prometheus metrics share: a histogram
// of durations, written in the Prometheus text format.
package metrics

import (
	"fmt"
	"io"
	"sort"
	"sync/atomic"
	"time"
)

// Buckets are the upper bounds, in seconds, of every Histogram's buckets:
// half a millisecond to ten seconds, the range of a push or of a
// configuration's load.
var Buckets = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram is a histogram of durations over Buckets. It is safe for
// concurrent use: every field is atomic. The zero value is empty and ready.
type Histogram struct {
	counts  [len(Buckets) + 1]atomic.Uint64 // one per bucket, the last for +Inf
	sumNano atomic.Uint64
}

// Observe adds d to the histogram.
func (h *Histogram) Observe(d time.Duration) {
	h.counts[sort.SearchFloat64s(Buckets[:], d.Seconds())].Add(1)
	h.sumNano.Add(uint64(max(d.Nanoseconds(), 0)))
}

// WritePrometheus writes h as the histogram name, with its HELP and TYPE
// lines. Its count is that of its +Inf bucket, as Prometheus requires,
// even while observations are being added.
func (h *Histogram) WritePrometheus(w io.Writer, name, help string) {
	WriteHeader(w, name, "histogram", help)
	var cum uint64
	for i, le := range Buckets {
		cum += h.counts[i].Load()
		fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", name, le, cum)
	}
	cum += h.counts[len(Buckets)].Load()
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n", name, cum)
	fmt.Fprintf(w, "%s_sum %g\n", name, float64(h.sumNano.Load())/1e9)
	fmt.Fprintf(w, "%s_count %d\n", name, cum)
}
