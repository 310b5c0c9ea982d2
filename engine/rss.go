package engine

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// RSSMB returns the process's resident set size in MiB from /proc/self/status
// (VmRSS), or 0 where that file does not exist.
func RSSMB() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest) // "123456 kB"
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.Atoi(fields[0])
		if err != nil {
			return 0
		}
		return (kb + 1023) / 1024
	}
	return 0
}
