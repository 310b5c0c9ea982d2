package output

import (
	"fmt"
	"strings"
)

// MismatchError is a resume refused because what the interrupted run
// recorded (its resume guard, its output's schema metadata) differs from
// this run's: every key that differs, in sorted order. It wraps
// ErrResumeMismatch; the job layer names the options behind the keys.
type MismatchError struct{ Diffs []Mismatch }

// Mismatch is one key whose value differs: Was in the interrupted run, Now
// in this one; InWas or InNow is false where the run did not record it.
type Mismatch struct {
	Key, Was, Now string
	InWas, InNow  bool
}

func (e *MismatchError) Error() string {
	parts := make([]string, len(e.Diffs))
	for i, d := range e.Diffs {
		parts[i] = d.String()
	}
	return fmt.Sprintf("%v: %s", ErrResumeMismatch, strings.Join(parts, "; "))
}

func (e *MismatchError) Unwrap() error { return ErrResumeMismatch }

// String says the difference with the key's own name and values.
func (d Mismatch) String() string {
	switch {
	case !d.InWas:
		return fmt.Sprintf("%s is %q in this run and not recorded by the interrupted one", d.Key, d.Now)
	case !d.InNow:
		return fmt.Sprintf("%s was %q in the interrupted run and is not set in this one", d.Key, d.Was)
	}
	return fmt.Sprintf("%s was %q in the interrupted run; it is %q now", d.Key, d.Was, d.Now)
}
