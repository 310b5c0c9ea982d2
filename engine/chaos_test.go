package engine

import (
	"testing"
	"time"
)

func TestParseChaos(t *testing.T) {
	tok := int32(7777)
	tests := []struct {
		in      string
		want    Chaos
		wantErr bool
	}{
		{"", Chaos{}, false},
		{"abort-on-token=7777", Chaos{AbortOnToken: &tok}, false},
		{" hang-on-token=7777 , delay=250ms", Chaos{HangOnToken: &tok, Delay: 250 * time.Millisecond}, false},
		{"exit-after=3", Chaos{ExitAfter: 3}, false},
		{"exit-after=0", Chaos{}, true},
		{"delay=-1s", Chaos{}, true},
		{"abort-on-token=x", Chaos{}, true},
		{"explode=1", Chaos{}, true},
		{"abort-on-token", Chaos{}, true},
		{"abort-on-type=QUANTIZE,hang-on-type=LOAD", Chaos{AbortOnType: "QUANTIZE", HangOnType: "LOAD"}, false},
		{"abort-on-type=quantize", Chaos{}, true},
		{"hang-on-type=", Chaos{}, true},
	}
	for _, tt := range tests {
		got, err := ParseChaos(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseChaos(%q) error %v; want error %t", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && got.String() != tt.want.String() {
			t.Errorf("ParseChaos(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzParseChaos checks that whatever parses prints back to the same drills.
func FuzzParseChaos(f *testing.F) {
	f.Add("")                                                // no drill
	f.Add("abort-on-token=101,hang-on-token=102")            // both token drills
	f.Add("exit-after=5,delay=1.5s")                         // counters and durations
	f.Add("delay=1h,,exit-after=1")                          // empty element
	f.Add("abort-on-token=99999999999")                      // out of int32 range
	f.Add("hang-on-token=-3,delay=0s,exit-after=2147483647") // edge values
	f.Add("abort-on-type=QUANTIZE,hang-on-type=LOAD")        // type drills
	f.Add("hang-on-type=Q,UANTIZE")                          // a type cut by a comma
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseChaos(s)
		if err != nil {
			return
		}
		again, err := ParseChaos(c.String())
		if err != nil {
			t.Fatalf("ParseChaos(%q) = %q, which does not parse: %v", s, c, err)
		}
		if again.String() != c.String() {
			t.Fatalf("round trip %q → %q → %q", s, c, again)
		}
	})
}
