package metrics

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTicks is the unit of /proc's CPU times (USER_HZ): 100 a second on
// every Linux that Go runs on.
const clockTicks = 100

// readProcess reads the process's figures from /proc/self.
func readProcess() (process, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return process{}, false
	}
	// The fields after the command, which is in parentheses and may hold
	// anything: state is field 3, utime 14, stime 15, rss 24 (proc(5)).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return process{}, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 22 {
		return process{}, false
	}
	num := func(field int) int64 {
		n, _ := strconv.ParseInt(string(f[field-3]), 10, 64)
		return n
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return process{}, false
	}
	return process{
		rss: num(24) * int64(os.Getpagesize()),
		cpu: time.Duration(num(14)+num(15)) * time.Second / clockTicks,
		fds: len(fds) - 1, // less the one ReadDir had open
	}, true
}
