package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckGBNF: an empty grammar and one of deeply nested groups are
// refused; parentheses in strings, classes and comments do not count.
func TestCheckGBNF(t *testing.T) {
	deep := "root ::= " + strings.Repeat("(", 20000) + `"a"` + strings.Repeat(")", 20000) + "\n"
	for _, tc := range []struct {
		name, text string
		ok         bool
	}{
		{"a grammar", `root ::= "yes" | "no"` + "\n", true},
		{"groups within the bound", "root ::= " + strings.Repeat("(", MaxNesting) + `"a"` + strings.Repeat(")", MaxNesting), true},
		{"parentheses in strings, classes and comments", "# ((((\nroot ::= \"((((\" [(((] \"\\\"(\"\n", true},
		{"empty", "", false},
		{"blank", " \n\t\n", false},
		{"comments only", "# nothing here\n# (((\n", false},
		{"deeply nested groups", deep, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckGBNF(tc.text)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrGrammar)) {
				t.Errorf("CheckGBNF: got %v; want ok %v", err, tc.ok)
			}
		})
	}
}
