package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// summary is a result reduced to the figures of the table.
type summary struct {
	ok                   bool
	err                  string
	initialSync          float64 // s
	initialCPU           float64 // s
	initialClientCPU     float64 // s, the load tool's
	initialBytes         float64 // received by the clients
	first, p50, p99      float64 // s, over the clients of every round
	maxMedian, maxWorst  float64 // s, the per-round maximum: median and worst round
	commitMedian         float64 // s, making the change (files written, control call): median round
	bytes                float64 // per change
	cpu                  float64 // s per change
	clientCPU            float64 // s per change, the load tool's
	idleRSS, rss, peak   float64 // MiB
	clientRSS            float64 // MiB
	updated, expected    int     // client updates over all rounds
	rounds, quietMissing int
}

func summarize(r *result) summary {
	s := summary{ok: r.Err == "", err: r.Err, initialSync: r.InitialSync, initialCPU: r.InitialCPU,
		initialClientCPU: r.InitialClientCPU, initialBytes: float64(r.InitialBytes),
		idleRSS: mib(r.IdleRSS), rss: mib(r.RSS), peak: mib(r.PeakRSS), clientRSS: mib(r.ClientRSS),
		rounds: len(r.Rounds), expected: len(r.Rounds) * r.Clients}
	var all []time.Duration
	var maxes, commits []float64
	for _, rr := range r.Rounds {
		all = append(all, rr.latencies...)
		maxes = append(maxes, rr.Max)
		commits = append(commits, rr.Commit)
		s.bytes += float64(rr.Bytes)
		s.cpu += rr.CPU
		s.clientCPU += rr.ClientCPU
		s.updated += rr.Updated
		if !rr.Quiet {
			s.quietMissing++
		}
	}
	if n := len(r.Rounds); n > 0 {
		s.bytes /= float64(n)
		s.cpu /= float64(n)
		s.clientCPU /= float64(n)
		slices.Sort(all)
		slices.Sort(maxes)
		if len(all) > 0 {
			s.first = all[0].Seconds()
		}
		s.p50 = quantile(all, 0.50).Seconds()
		s.p99 = quantile(all, 0.99).Seconds()
		s.maxMedian = maxes[(len(maxes)-1)/2]
		s.maxWorst = maxes[len(maxes)-1]
		slices.Sort(commits)
		s.commitMedian = commits[(len(commits)-1)/2]
	}
	return s
}

// row is one line of the table: a label and how to read the figure.
type row struct {
	label string
	value func(summary) float64
	unit  func(float64) string
}

func ms(v float64) string   { return fmt.Sprintf("%.1f ms", v*1e3) }
func secs(v float64) string { return fmt.Sprintf("%.3f s", v) }
func mibs(v float64) string { return fmt.Sprintf("%.1f MiB", v) }
func kib(v float64) string  { return fmt.Sprintf("%.1f KiB", v/1024) }

func mibBytes(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }

var rows = []row{
	{"initial sync, all clients", func(s summary) float64 { return s.initialSync }, secs},
	{"server CPU, initial sync", func(s summary) float64 { return s.initialCPU }, secs},
	{"load tool CPU, initial sync", func(s summary) float64 { return s.initialClientCPU }, secs},
	{"bytes to clients, initial sync", func(s summary) float64 { return s.initialBytes }, mibBytes},
	{"change → all clients: max (median round)", func(s summary) float64 { return s.maxMedian }, ms},
	{"change → all clients: max (worst round)", func(s summary) float64 { return s.maxWorst }, ms},
	{"change → first client (best round)", func(s summary) float64 { return s.first }, ms},
	{"making the change (median round)", func(s summary) float64 { return s.commitMedian }, ms},
	{"change → client: p50", func(s summary) float64 { return s.p50 }, ms},
	{"change → client: p99", func(s summary) float64 { return s.p99 }, ms},
	{"bytes to clients per change", func(s summary) float64 { return s.bytes }, kib},
	{"server CPU per change", func(s summary) float64 { return s.cpu }, secs},
	{"load tool CPU per change", func(s summary) float64 { return s.clientCPU }, secs},
	{"server RSS, clients idle", func(s summary) float64 { return s.idleRSS }, mibs},
	{"server RSS after the changes", func(s summary) float64 { return s.rss }, mibs},
	{"server peak RSS (VmHWM)", func(s summary) float64 { return s.peak }, mibs},
	{"load tool RSS, clients idle", func(s summary) float64 { return s.clientRSS }, mibs},
}

// printTable prints the figures of one mode: a column per server, then the
// ratios go-control-plane / xdsd (dir). With several passes (-passes), each
// figure is its median over the server's passes, and the ratios are those
// of the medians.
func printTable(w io.Writer, o options, mode string, results []*result) {
	byServer := map[string][]summary{}
	var servers []string
	for _, r := range results {
		if r.Mode != mode {
			continue
		}
		if _, seen := byServer[r.Server]; !seen {
			servers = append(servers, r.Server)
		}
		byServer[r.Server] = append(byServer[r.Server], summarize(r))
	}
	if len(servers) == 0 {
		return
	}
	passes := ""
	if o.passes > 1 {
		passes = fmt.Sprintf(", median of %d passes", o.passes)
	}
	fmt.Fprintf(w, "\n%s: %d clients × %d clusters × %d endpoints, %d endpoint set(s) changed per round, %d rounds, %d stream(s) per connection, %s clients%s\n",
		mode, o.clients, o.clusters, o.endpoints, o.changes, o.rounds, o.streamsPerConn, o.client, passes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"", ""}
	for _, s := range servers {
		head = append(head, serverTitles[s])
	}
	var ratios []string
	for _, g := range []string{srvGCPSnapshot, srvGCPLinear} {
		if _, ok := byServer[g]; ok && byServer[srvXDSDDir] != nil {
			ratios = append(ratios, g)
			head = append(head, strings.TrimPrefix(g, "gcp-")+" ÷ xdsd")
		}
	}
	fmt.Fprintln(tw, strings.Join(head[1:], "\t")+"\t")
	for _, rw := range rows {
		cells := []string{rw.label}
		for _, s := range servers {
			if v, ok := figure(byServer[s], rw); ok || v != 0 {
				cells = append(cells, rw.unit(v))
			} else {
				cells = append(cells, "-")
			}
		}
		base, baseOK := figure(byServer[srvXDSDDir], rw)
		for _, g := range ratios {
			v, ok := figure(byServer[g], rw)
			cells = append(cells, ratio(v, base, ok && baseOK))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	cells := []string{"clients updated, all rounds"}
	for _, s := range servers {
		updated, expected := 0, 0
		for _, sm := range byServer[s] {
			updated += sm.updated
			expected += sm.expected
		}
		cells = append(cells, fmt.Sprintf("%d/%d", updated, expected))
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	tw.Flush()
	loads := make([]string, 0, len(results))
	for _, r := range results {
		if r.Mode == mode && r.LoadAvg != "" {
			loads = append(loads, runTitle(o, r)+": "+strings.Join(strings.Fields(r.LoadAvg)[:3], " "))
		}
	}
	if len(loads) > 0 {
		fmt.Fprintf(w, "load average (1, 5, 15 min) at the end of each server's run: %s\n", strings.Join(loads, "; "))
	}
	for _, r := range results {
		if r.Mode != mode {
			continue
		}
		sm := summarize(r)
		if !sm.ok {
			fmt.Fprintf(w, "%s failed (figures up to the failure): %s\n", runTitle(o, r), sm.err)
		}
		if sm.quietMissing > 0 {
			fmt.Fprintf(w, "%s: %d round(s) did not go quiet within -quiet-timeout; their bytes and CPU are cut there\n", runTitle(o, r), sm.quietMissing)
		}
		if fo := r.Failover; fo != nil {
			share := 0.0
			if r.InitialBytes > 0 {
				share = 100 * float64(fo.Bytes) / float64(r.InitialBytes)
			}
			fmt.Fprintf(w, "%s: failover: a replica killed, its %d clients resumed on the others within %.1f ms (first %.1f ms, p50 %.1f ms), receiving %.1f KiB (%.3f %% of the initial sync's bytes)\n",
				runTitle(o, r), fo.Clients, fo.Max*1e3, fo.Min*1e3, fo.P50*1e3, float64(fo.Bytes)/1024, share)
		}
	}
}

// runTitle names the server of r, and its pass when there are several.
func runTitle(o options, r *result) string {
	if o.passes > 1 {
		return fmt.Sprintf("%s (pass %d)", serverTitles[r.Server], r.Pass+1)
	}
	return serverTitles[r.Server]
}

// figure is row rw's figure for one server: its median over the server's
// passes that completed (ok), or, if none did, over the figures up to each
// failure.
func figure(passes []summary, rw row) (v float64, ok bool) {
	var vals []float64
	for _, sm := range passes {
		if sm.ok {
			vals = append(vals, rw.value(sm))
		}
	}
	if ok = len(vals) > 0; !ok {
		for _, sm := range passes {
			vals = append(vals, rw.value(sm))
		}
	}
	return median(vals), ok
}

// median returns the median of vals (the mean of the middle two for an
// even count), or 0 for none. It sorts vals.
func median(vals []float64) float64 {
	n := len(vals)
	if n == 0 {
		return 0
	}
	slices.Sort(vals)
	if n%2 == 1 {
		return vals[n/2]
	}
	return (vals[n/2-1] + vals[n/2]) / 2
}

// ratio formats a/b.
func ratio(a, b float64, ok bool) string {
	if !ok || b == 0 || math.IsNaN(a/b) {
		return "-"
	}
	return fmt.Sprintf("%.1f×", a/b)
}
