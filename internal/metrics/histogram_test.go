package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHistogram(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{
		0,                      // the first bucket
		500 * time.Microsecond, // on the first bound: in it
		501 * time.Microsecond, // just past it: the second
		30 * time.Millisecond,  // le=0.05
		10 * time.Second,       // on the last bound
		11 * time.Second,       // +Inf
		-time.Millisecond,      // a clock step back: the first bucket, nothing summed
	} {
		h.Observe(d)
	}
	var b strings.Builder
	h.WritePrometheus(&b, "x_seconds", "A test.")
	got := b.String()
	for _, line := range []string{
		"# HELP x_seconds A test.\n# TYPE x_seconds histogram\n",
		"x_seconds_bucket{le=\"0.0005\"} 3\n",
		"x_seconds_bucket{le=\"0.001\"} 4\n",
		"x_seconds_bucket{le=\"0.025\"} 4\n",
		"x_seconds_bucket{le=\"0.05\"} 5\n",
		"x_seconds_bucket{le=\"5\"} 5\n",
		"x_seconds_bucket{le=\"10\"} 6\n",
		"x_seconds_bucket{le=\"+Inf\"} 7\n",
		"x_seconds_sum 21.031001\n",
		"x_seconds_count 7\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("missing %q in:\n%s", line, got)
		}
	}
	if n := strings.Count(got, "x_seconds_bucket"); n != len(Buckets)+1 {
		t.Errorf("%d buckets written, want %d", n, len(Buckets)+1)
	}
}

// TestHistogramConcurrent: observations from several goroutines are all
// counted (run with -race).
func TestHistogramConcurrent(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 1000 {
				h.Observe(time.Duration(i) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	var b strings.Builder
	h.WritePrometheus(&b, "y", "")
	if !strings.Contains(b.String(), "y_count 4000\n") {
		t.Errorf("count is not 4000:\n%s", b.String())
	}
}
