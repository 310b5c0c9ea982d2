package grammar

import (
	"errors"
	"fmt"
)

// MaxNesting bounds how deeply parenthesised groups of a GBNF grammar may
// nest. llama.cpp parses groups recursively: a grammar of thousands of
// nested groups overflows the worker's stack and aborts it, every time.
// No useful grammar nests this deep; a JSON schema's grammar uses rules.
const MaxNesting = 64

// ErrGrammar marks a grammar refused before any worker sees it.
var ErrGrammar = errors.New("unusable grammar")

// CheckGBNF refuses, before a worker parses it, a GBNF grammar llama.cpp
// would not take or would abort on: one with no rule at all (only blanks
// and comments: llama.cpp would take it as "no grammar" and leave the
// output unconstrained) and one whose groups nest deeper than MaxNesting.
// Quoted strings, character classes and comments are skipped; the rest of
// the syntax is llama.cpp's to check.
func CheckGBNF(text string) error {
	depth, deepest, line, deepLine := 0, 0, 1, 0
	content := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\n':
			line++
		case '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			line++
		case '"', '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			for i++; i < len(text) && text[i] != end; i++ {
				if text[i] == '\\' {
					i++
				} else if text[i] == '\n' {
					line++
				}
			}
			content = true
		case '(':
			depth++
			if depth > deepest {
				deepest, deepLine = depth, line
			}
			content = true
		case ')':
			depth--
			content = true
		case ' ', '\t', '\r':
		default:
			content = true
		}
	}
	switch {
	case !content:
		return fmt.Errorf("%w: it is empty (no rule; give a rule root ::= …)", ErrGrammar)
	case deepest > MaxNesting:
		return fmt.Errorf("%w: groups nest %d deep (line %d); at most %d", ErrGrammar, deepest, deepLine, MaxNesting)
	}
	return nil
}
