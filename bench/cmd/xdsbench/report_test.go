package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestPassOrder checks that over as many passes as servers each server is
// measured once in each position.
func TestPassOrder(t *testing.T) {
	servers := []string{"a", "b", "c"}
	want := [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}}
	for pass, w := range want {
		if got := passOrder(servers, pass); !slices.Equal(got, w) {
			t.Errorf("pass %d: %v, want %v", pass, got, w)
		}
	}
	if !slices.Equal(servers, []string{"a", "b", "c"}) {
		t.Errorf("passOrder changed its argument: %v", servers)
	}
}

// TestTableMedianOfPasses checks that with several passes each figure is
// its median over the passes, the ratio that of the medians, and a failed
// pass neither counts in the median nor goes unreported.
func TestTableMedianOfPasses(t *testing.T) {
	o := defaultOptions()
	o.passes, o.rounds, o.clients = 3, 1, 10
	res := func(server string, pass int, maxSeconds, cpu float64, failure string) *result {
		return &result{Server: server, Mode: "delta", Pass: pass, Clients: o.clients, Err: failure, LoadAvg: "0.50 0.40 0.30 1/99 12",
			Rounds: []roundResult{{Updated: o.clients, Max: maxSeconds, CPU: cpu}}}
	}
	results := []*result{
		res(srvXDSDDir, 0, 0.040, 0.030, ""), res(srvGCPLinear, 0, 0.900, 1.500, ""),
		res(srvGCPLinear, 1, 0.700, 1.100, ""), res(srvXDSDDir, 1, 0.020, 0.010, ""),
		res(srvXDSDDir, 2, 0.030, 0.020, ""), res(srvGCPLinear, 2, 5.000, 9.000, "stream failed"),
	}
	var out bytes.Buffer
	printTable(&out, o, "delta", results)
	table := out.String()
	for _, want := range []string{
		"median of 3 passes",
		// xdsd: median of 40, 20, 30 ms; gcp-linear: of its two complete
		// passes, 900 and 700 ms; 800 / 30.
		"max (median round)     30.0 ms    800.0 ms  26.7×",
		"server CPU per change    0.020 s    1.300 s  65.0×",
		"clients updated, all rounds 30/30 30/30",
		"gcp-linear (pass 3) failed (figures up to the failure): stream failed",
		"xdsd (dir) (pass 2): 0.50 0.40 0.30",
	} {
		if !strings.Contains(strings.Join(strings.Fields(table), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
