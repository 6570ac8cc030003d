package h2grpc

import (
	"math"
	"testing"
	"time"
)

func TestDecodeTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1H":        time.Hour,
		"2562047H":  2562047 * time.Hour, // the most hours that fit
		"2562048H":  math.MaxInt64,       // one more: as long as a Duration goes
		"99999999H": math.MaxInt64,       // before: wrapped to a negative, an instant deadline
		"99999999M": 99999999 * time.Minute,
		"99999999S": 99999999 * time.Second,
		"100m":      100 * time.Millisecond,
		"7u":        7 * time.Microsecond,
		"99999999n": 99999999,
	} {
		if got, ok := decodeTimeout(in); !ok || got != want {
			t.Errorf("decodeTimeout(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "H", "1", "123456789H", "1h", "-1S", "1.5S", "1 S"} {
		if got, ok := decodeTimeout(bad); ok {
			t.Errorf("decodeTimeout(%q) = %v, accepted", bad, got)
		}
	}
}
