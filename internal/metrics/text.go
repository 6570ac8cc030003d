package metrics

import (
	"fmt"
	"io"
	"strconv"
)

// WriteHeader writes a metric's HELP and TYPE lines; kind is "counter",
// "gauge" or "histogram".
func WriteHeader(w io.Writer, name, kind, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}

// WriteSingle writes a metric without labels: its HELP and TYPE lines and
// its value, without an exponent.
func WriteSingle(w io.Writer, name, kind, help string, v float64) {
	WriteHeader(w, name, kind, help)
	fmt.Fprintf(w, "%s %s\n", name, strconv.FormatFloat(v, 'f', -1, 64))
}
