package engine

import "testing"

func TestValidPrefix(t *testing.T) {
	for _, tc := range []struct {
		pending, piece string
		ok             bool
	}{
		{"", "plain", true},
		{"", "é", true},
		{"", "\xc3", true},          // an unfinished é
		{"\xc3", "\xa9", true},      // finished
		{"\xc3", "\"", false},       // a quote where the continuation is due
		{"", "\xa9", false},         // a continuation byte without its lead
		{"", "\xe2\x82", true},      // unfinished €
		{"\xe2\x82", "\xac!", true}, // € then more
		{"", "\xed\xa0", false},     // a surrogate's start
		{"", "\xf5", false},         // never a lead byte
		{"", "a\xc3b", false},
	} {
		if got := validPrefix([]byte(tc.pending), []byte(tc.piece)); got != tc.ok {
			t.Errorf("validPrefix(%q, %q) = %v; want %v", tc.pending, tc.piece, got, tc.ok)
		}
	}
	for _, tc := range []struct{ text, tail string }{
		{"abc", ""}, {"ab\xc3", "\xc3"}, {"x\xe2\x82", "\xe2\x82"}, {"€", ""}, {"\xa9", ""},
	} {
		if got := string(unfinished([]byte(tc.text))); got != tc.tail {
			t.Errorf("unfinished(%q) = %q; want %q", tc.text, got, tc.tail)
		}
	}
}
