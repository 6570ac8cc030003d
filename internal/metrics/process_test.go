package metrics

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// processValues writes the process's metrics and returns them by name,
// checking that each has its HELP and TYPE lines.
func processValues(t *testing.T) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	WriteProcess(&b)
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			t.Fatalf("line %q", line)
		}
		if !strings.Contains(b.String(), "# TYPE "+name+" ") || !strings.Contains(b.String(), "# HELP "+name+" ") {
			t.Errorf("%s has no HELP or TYPE line", name)
		}
		out[name] = f
	}
	return out
}

func TestWriteProcess(t *testing.T) {
	v := processValues(t)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes", "process_start_time_seconds"} {
		if v[name] <= 0 {
			t.Errorf("%s = %v, want > 0", name, v[name])
		}
	}
	if runtime.GOOS != "linux" {
		return
	}
	if v["process_resident_memory_bytes"] < 1<<20 {
		t.Errorf("process_resident_memory_bytes = %v, want at least a MiB", v["process_resident_memory_bytes"])
	}
	if _, ok := v["process_cpu_seconds_total"]; !ok {
		t.Error("no process_cpu_seconds_total")
	}
	// A file opened is one more descriptor.
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if after := processValues(t)["process_open_fds"]; after != v["process_open_fds"]+1 {
		t.Errorf("process_open_fds = %v with a file opened, %v before", after, v["process_open_fds"])
	}
}
