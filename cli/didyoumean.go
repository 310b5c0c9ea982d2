package cli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// undefinedFlag is the flag package's message for a flag the command does
// not have.
var undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -{1,2}(\S+)$`)

// flagUsageError is a command's usage error (exit 2), with a "did you
// mean" for a flag it does not have when one of its flags is near:
// --text_field for --text-field, --batchtokens, --modle.
func flagUsageError(c *cli.Context, err error, _ bool) error {
	m := undefinedFlag.FindStringSubmatch(err.Error())
	if m == nil || c == nil || c.Command == nil {
		return usageError{err}
	}
	if near := nearestFlag(m[1], c.Command.Flags); near != "" {
		return usageError{fmt.Errorf("%w; did you mean --%s?", err, near)}
	}
	return usageError{err}
}

// nearestFlag is the name of the flag closest to name: the same once
// underscores are dashes and case is ignored, else within two edits; ""
// when none is, or two are equally near.
func nearestFlag(name string, flags []cli.Flag) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }
	want := norm(name)
	best, bestDist, tie := "", 3, false
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) < 2 { // a one-letter alias is near everything
				continue
			}
			d := editDistance(want, norm(n))
			if strings.ReplaceAll(want, "-", "") == strings.ReplaceAll(norm(n), "-", "") {
				d = 0
			}
			switch {
			case d < bestDist:
				best, bestDist, tie = f.Names()[0], d, false
			case d == bestDist && f.Names()[0] != best:
				tie = true
			}
		}
	}
	if tie {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
