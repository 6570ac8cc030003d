package server

import (
	"fmt"
	"io"
	"sort"
	"sync/atomic"

	"github.com/xdsd/xdsd/internal/metrics"
	"github.com/xdsd/xdsd/resource"
)

// counters are the server's running totals; all fields are atomic.
type counters struct {
	responses atomic.Uint64
	acks      [resource.NumTypes]atomic.Uint64 // by type Order
	nacks     [resource.NumTypes]atomic.Uint64
	latency   metrics.Histogram
}

// WritePrometheus writes the server's metrics in the Prometheus text
// format: open streams by variant and by type, responses sent, ACKs and
// NACKs by type, streams refused by their bounds and clients refused the
// node they claim, and the latency from a snapshot's publication to the
// responses it causes.
func (s *Server) WritePrometheus(w io.Writer) {
	streams := map[string]int{}
	types := map[[2]string]int{}
	for _, st := range s.status.snapshot(false) { // the nodes are not needed
		streams[st.Variant]++
		for _, ts := range st.Types {
			types[[2]string{st.Variant, resource.Lookup(ts.TypeURL).Short}]++
		}
	}
	metrics.WriteHeader(w, "xdsd_streams", "gauge", "Open xDS streams by variant.")
	for _, v := range sortedKeys(streams) {
		fmt.Fprintf(w, "xdsd_streams{variant=%q} %d\n", v, streams[v])
	}
	metrics.WriteHeader(w, "xdsd_stream_types", "gauge", "Open xDS streams by variant and resource type they use.")
	keys := make([][2]string, 0, len(types))
	for k := range types {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(w, "xdsd_stream_types{variant=%q,type=%q} %d\n", k[0], k[1], types[k])
	}
	metrics.WriteSingle(w, "xdsd_responses_total", "counter", "xDS responses sent.", float64(s.metrics.responses.Load()))
	for _, m := range []struct {
		name, help string
		v          *[resource.NumTypes]atomic.Uint64
	}{
		{"xdsd_acks_total", "ACKs received, by type.", &s.metrics.acks},
		{"xdsd_nacks_total", "NACKs received, by type.", &s.metrics.nacks},
	} {
		metrics.WriteHeader(w, m.name, "counter", m.help)
		for _, t := range resource.Types() {
			fmt.Fprintf(w, "%s{type=%q} %d\n", m.name, t.Short, m.v[t.Order].Load())
		}
	}
	metrics.WriteHeader(w, "xdsd_streams_refused_total", "counter", "Streams refused at once with UNAVAILABLE, by the bound they were over (Config.MaxStreams, StreamsPerSecond).")
	fmt.Fprintf(w, "xdsd_streams_refused_total{reason=\"max_streams\"} %d\n", s.admission.refusedMax.Load())
	fmt.Fprintf(w, "xdsd_streams_refused_total{reason=\"rate\"} %d\n", s.admission.refusedRate.Load())
	metrics.WriteSingle(w, "xdsd_authz_denied_total", "counter", "Streams, Fetch calls and REST requests refused the node they claim (Config.Authorize).", float64(s.refusals.count.Load()))
	s.metrics.latency.WritePrometheus(w, "xdsd_push_latency_seconds",
		"Time from a snapshot's publication to each response it causes.")
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
